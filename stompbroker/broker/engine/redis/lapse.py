"""
When this node's liveness key may have expired without the node seeing it.

A node whose process was stopped (SIGSTOP, a paused VM, swapping, a debugger)
or cut from Redis longer than ``--node-timeout`` comes back believing it still
holds the queue entries it had read; meanwhile its liveness key expired and
another node claimed them.  Its key is certainly alive until ``--node-timeout``
after the *sending* of the last beat Redis confirmed (Redis ran the ``SET`` no
earlier than it was sent), so the node knows, by its own monotonic clock, that
past that moment it may have lapsed, whatever woke it: a beat that comes late,
a read's reply, an acknowledgement.  A beat (:data:`~.liveness.BEAT`) that
finds the key gone says so from Redis's side too.

What the node does then (re-register, keep only the entries its pending lists
still name) is :class:`~stompbroker.broker.engine.redis.liveness.Liveness`'s.

Pure: only a clock (``seconds()``), so that a ``task.Clock`` tests it.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

from attrs import define, field

from stompbroker.broker.engine.redis.scripts import load
from stompbroker.protocol.message import Message

__all__ = [
    "CLAIM_DEAD",
    "Aside",
    "LapseWatch",
    "Sorted",
    "claimed_entries",
    "claimed_records",
    "sort_after_lapse",
]

#: lua/claim_dead.lua (what it takes and answers is said there).
CLAIM_DEAD = load("claim_dead")


def claimed_entries(reply: Any) -> list[tuple[bytes, dict[bytes, bytes] | None]]:
    """
    :param reply: :data:`CLAIM_DEAD`'s first part, ``[[id, [field, value, ...]], ...]``.
    :returns: as redis-py's ``XCLAIM``: ``(id, fields)``, ``None`` for an entry
        deleted while pending.
    """
    entries: list[tuple[bytes, dict[bytes, bytes] | None]] = []
    for item in reply or ():
        if not item:
            continue
        entry_id, flat = item[0], item[1] if len(item) > 1 else None
        fields = dict(zip(flat[::2], flat[1::2], strict=True)) if flat else None
        entries.append((entry_id, fields))
    return entries


def claimed_records(ids: list[Any], reply: Any) -> dict[Any, int]:
    """
    :param ids: the entry ids :data:`CLAIM_DEAD` was asked to claim, in order.
    :param reply: its second part: their records, 0 for none.
    :returns: entry id -> the dead node's record, for those that had one.
    """
    counts = list(reply or ()) or [0] * len(ids)
    return {entry_id: int(count) for entry_id, count in zip(ids, counts, strict=True) if count}


class LapseWatch:
    """
    Until when this node's liveness key is certainly alive.

    :param clock: has ``seconds()`` (the reactor, or a ``task.Clock``).
    :param timeout: ``--node-timeout``, seconds: the key's time to live.
    :raises ValueError: for a timeout that is not positive.
    """

    __slots__ = ("_clock", "timeout", "safe_until")

    def __init__(self, clock: Any, timeout: float) -> None:
        if timeout <= 0:
            raise ValueError(f"a node timeout is positive, got {timeout!r}")
        self._clock = clock
        self.timeout = timeout
        #: The clock's seconds until which the key is certainly in Redis: none
        #: yet (the node has not announced itself).
        self.safe_until = clock.seconds()

    def sending(self) -> float:
        """:returns: now, the moment a beat is sent (hand it to :meth:`confirmed`)."""
        now: float = self._clock.seconds()
        return now

    def confirmed(self, sent_at: float) -> None:
        """
        Redis confirmed a beat (``SET ... PX``) sent at ``sent_at``: the key lives
        at least ``timeout`` from then.  A confirmation that comes after a later
        one changes nothing.
        """
        self.safe_until = max(self.safe_until, sent_at + self.timeout)

    def lapsed(self) -> bool:
        """
        :returns: whether the key may have expired by now: no beat sent within
            the last ``timeout`` seconds was confirmed.  One comparison: the
            node asks per read and per turn of settling, never per message.
        """
        return bool(self._clock.seconds() >= self.safe_until)

    def gone(self) -> None:
        """A beat found the key gone (:data:`~.liveness.BEAT`): lapsed, whatever the clock."""
        self.safe_until = self._clock.seconds()


@define
class Aside:
    """
    What a queue put aside while its node recovers from a lapse.

    :ivar messages: read ahead and not handed out, in order.
    :ivar settled: the entries its consumers acknowledged meanwhile, keyed as
        the queue keys them (an entry id of the queue's stream, or ``(stream, id)``).
    """

    messages: list[Message] = field(factory=list)
    settled: list[Hashable] = field(factory=list)


@define
class Sorted:
    """
    :ivar kept: the messages put aside that are still this node's, in order.
    :ivar dropped: how many put aside another node took over.
    :ivar to_end: the settled entries still this node's: to end now.
    :ivar forget: message ids whose entries another node took over: their
        acknowledgements end nothing here.
    """

    kept: list[Message]
    dropped: int
    to_end: list[Hashable]
    forget: list[str]


def sort_after_lapse(
    owned: set[tuple[str, bytes]], stream: str, entries: dict[str, Any], aside: Aside
) -> Sorted:
    """
    Sort a queue's state by what its node's pending lists hold after a lapse.

    :param owned: ``(stream, entry id)`` this node's pending lists hold now.
    :param stream: the queue's stream (an entry id alone is one of it).
    :param entries: message id -> entry key, for what the queue read and has
        not settled (read ahead, delivered and unacknowledged, waiting for a
        redelivery).
    """

    def mine(key: Any) -> bool:
        return ((stream, key) if type(key) is bytes else key) in owned

    forget = [message_id for message_id, key in entries.items() if not mine(key)]
    gone = set(forget)
    kept = [message for message in aside.messages if message.message_id not in gone]
    to_end = [key for key in aside.settled if mine(key)]
    return Sorted(kept, len(aside.messages) - len(kept), to_end, forget)
