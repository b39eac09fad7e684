"""
A message's redelivery count, kept when its stream entry moves between nodes.

A message's ``redelivery-count`` (and ``--max-redeliveries``, which
dead-letters by it) is made of three parts: what its payload says (the count it
had when it was last ``XADD``\\ ed), field ``r`` of its entry (a node that left
handed it back after delivering it: :data:`~.dispatch_scripts.RETURN_NODE`), and what
happened to the entry since: Redis's delivery count of it (each read or claim),
and the NACKs and departed consumers of the node that holds it, which Redis
does not see.  That last part lives in the holding node's memory only, so a
node keeps it in Redis as well, for the entries it redelivered itself: the hash
:func:`record_key` (one per node and stream), entry id -> the message's count,
set by ``HSET`` through the ordered writer when a consumer there NACKs a message
or leaves with it (one command per NACK, none per plain delivery), and ended
with the entry (:mod:`.queue_settling`'s scripts).  A node that claims the
entry from a dead one reads and removes the record in the same script
(:data:`~.lapse.CLAIM_DEAD`), and the count it hands out is one more than the
record, or grown by Redis's delivery count, whichever is higher.

An entry the deciding node moves to another node's stream (:data:`~.dispatch_scripts.MOVE`)
carries only its payload, so before it is decided its count is written into
the payload (:func:`fold`), as it is for an entry handed back by a node that left.
"""

from __future__ import annotations

from typing import Any

from stompbroker.broker.engine.redis.codec import decode, encode_entry

__all__ = ["fold"]


def fold(fields: dict[bytes, Any], delivered: int = 0, floor: int = 0) -> dict[bytes, Any]:
    """
    :param fields: a stream entry's fields (``m``, and ``r`` if it was handed back).
    :param delivered: redeliveries to add (Redis's delivery count of a claimed entry).
    :param floor: the least count it may end with (one more than a dead node's record).
    :returns: the fields with the whole count in the payload, and no ``r``: so
        that it goes with the payload wherever the entry is moved.
    """
    origin, message = decode(fields[b"m"])
    count = message.redeliveries + int(fields.get(b"r", 0)) + delivered
    message.redeliveries = max(count, floor)
    folded = {name: value for name, value in fields.items() if name != b"r"}
    folded[b"m"] = encode_entry(origin, message)
    return folded
