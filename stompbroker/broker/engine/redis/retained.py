"""
Retained messages shared by every node: each topic's last value in one Redis
hash, and a copy of it on every node that new subscriptions read from.

The rules (the headers, the ``retained:true`` copy, wildcard matching, oldest
retained first) are the one node's
(:mod:`stompbroker.broker.features.retain_rules`): every node keeps a
:class:`~stompbroker.broker.features.retain_rules.RetainedMessages` of its
own, so a SUBSCRIBE on any node gets its retained copies at once, before
anything published after it, exactly as on one node.

Keys (``PREFIX`` is the URL's prefix):

- ``PREFIX:retained`` (hash): a topic, spelt with ``/`` only
  (:func:`~stompbroker.broker.routing.syntax.normalise`) -> a sequence number, a
  newline, then the message as the codec encodes it; the field ``#seq`` counts
  the sets, so that a node that reads the hash orders the topics oldest
  retained first;
- ``PREFIX:retained:changes`` (channel): every set and remove, as ``s`` or
  ``r`` then the message.

:data:`SET` (``HINCRBY``, ``HSET``, ``PUBLISH``) and :data:`REMOVE` (``HDEL``,
``PUBLISH``) are one script each, one round trip, so a value and its notice
are one step in Redis.  The node that takes the SEND changes its own copy at
once (a subscriber there sees it as on one node); every node, that one too,
applies every notice in the order Redis ran the scripts (one pub/sub
connection per node), so all copies end on the value Redis holds, whichever
nodes set a topic at the same time.  A node reads the whole hash at start, and
again after its pub/sub connection came back (it may have missed notices).
"""

from __future__ import annotations

from typing import Any

from twisted.internet.defer import Deferred

from stompbroker.broker.engine.redis.codec import decode, encode
from stompbroker.broker.engine.redis.scripts import load
from stompbroker.broker.features.retain_rules import SET, RetainedMessages
from stompbroker.broker.features.retaining import retained_copies
from stompbroker.broker.features.selectors import Selector
from stompbroker.broker.routing.syntax import normalise
from stompbroker.logs import logger
from stompbroker.protocol.errors import ProtocolError
from stompbroker.protocol.message import Message

__all__ = ["REMOVE", "SET_SCRIPT", "ClusterRetained", "order_loaded"]

log = logger("stompbroker.broker.engine.redis")

#: The hash field that counts the sets (no topic is spelt so).
SEQUENCE = b"#seq"

#: lua/retain.lua (what it takes and answers is said there).
SET_SCRIPT = load("retain")

#: lua/unretain.lua (what it takes and answers is said there).
REMOVE = load("unretain")


def order_loaded(fields: dict[bytes, bytes]) -> list[Message]:
    """
    :param fields: the hash as ``HGETALL`` returns it.
    :returns: its messages, oldest retained first.
    :raises ValueError: for a value :data:`SET_SCRIPT` did not write.
    """
    numbered = []
    for field, value in fields.items():
        if field == SEQUENCE:
            continue
        end = value.index(b"\n")
        _, message = decode(value[end + 1 :])
        numbered.append((int(value[:end]), message))
    numbered.sort(key=lambda pair: pair[0])
    return [message for _, message in numbered]


class ClusterRetained:
    """
    This node's copy of the retained messages, and the writes that share them:
    what the router's ``retaining()`` is on the redis engine (:meth:`apply`).

    :param engine: the :class:`~stompbroker.broker.engine.redis.engine.RedisEngine`.
    """

    def __init__(self, engine: Any) -> None:
        self._engine = engine
        self.hash = engine.names.retained
        self.channel = engine.names.retained_channel
        #: This node's copy.
        self.retained = RetainedMessages()
        #: Grows with every notice applied, so that a reading of the hash sent
        #: before one does not undo it.
        self._changes = 0

    def apply(self, action: str, message: Message) -> Deferred[None] | None:
        """
        Keep ``message`` as its topic's last value, or forget the topic's, here
        at once and in Redis.

        :returns: for a persistent message, a Deferred that fires once Redis has
            it (the SEND's RECEIPT waits on it); otherwise ``None``.
        :raises LimitExceeded: if too many topics retain a message already.
        """
        engine = self._engine
        if not engine.writer.connected:
            engine._check_connected()
        if action is SET:
            self.retained.set(message)
            script = SET_SCRIPT
        else:
            self.retained.remove(message.destination)
            script = REMOVE
        args = (
            "EVALSHA",
            script,
            1,
            self.hash,
            self.channel,
            normalise(message.destination),
            encode(engine.ids.node, message),
        )
        if not message.persistent:
            engine.writer.command(*args)
            return None
        stored: Deferred[Any] = engine.writer.command_waited(*args)
        return stored.addCallback(lambda _: None)

    def copies(self, pattern: str, selector: Selector | None) -> list[Message]:
        """:returns: what a new subscription to ``pattern`` gets first, from this node's copy."""
        return retained_copies(self.retained, pattern, selector, self._engine.clock.seconds())

    def notice(self, payload: bytes) -> None:
        """Apply a set or remove, any node's, in the order Redis ran them."""
        self._changes += 1
        try:
            _, message = decode(payload[1:])
        except ValueError:
            log.warn("ignored a malformed retained message notice")
            return
        if payload[:1] == b"s":
            try:
                self.retained.set(message)
            except ProtocolError as error:
                log.warn(
                    "retained message of {topic} not kept on this node: {error}",
                    topic=message.destination,
                    error=error.message,
                )
        else:
            self.retained.remove(message.destination)

    def load(self) -> Deferred[None]:
        """
        Read the hash (after this node's earlier writes) and make this node's
        copy the same, unless a notice came meanwhile (the copy is as new then).
        """
        changes = self._changes
        read: Deferred[Any] = self._engine.writer.command_waited("HGETALL", self.hash)
        read.addCallback(self._loaded, changes)
        return read

    def _loaded(self, reply: Any, changes: int) -> None:
        if changes != self._changes:
            return
        if isinstance(reply, list):
            reply = dict(zip(reply[::2], reply[1::2], strict=True))
        copy = RetainedMessages()
        now = self._engine.clock.seconds()
        try:
            messages = order_loaded(reply)
        except ValueError:
            log.warn("the retained messages in Redis are malformed; kept this node's copy")
            return
        for message in messages:
            if 0.0 < message.expires <= now:
                continue
            try:
                copy.set(message)
            except ProtocolError:
                break
        self.retained = copy
