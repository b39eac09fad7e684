"""
What ends a shared queue's stream entries: settling, putting back, and ending copies.

A :class:`~stompbroker.broker.engine.redis.queues.StreamQueue` holds one
:class:`QueueSettling`: the entries its node has read and not settled, what it
settled this turn of the loop (ended together, ``XACK`` and ``XDEL`` in one
pipeline with the writes around them), and what it ended lately
(:class:`~stompbroker.broker.engine.redis.settled.RecentlySettled`), so that an
entry Redis hands out again is ended, not delivered.
"""

from __future__ import annotations

from typing import Any, Protocol

from stompbroker.broker.engine.redis.codec import decode, encode
from stompbroker.broker.engine.redis.dispatch import ClusterDispatch
from stompbroker.broker.engine.redis.lapse import Aside
from stompbroker.broker.engine.redis.settled import RecentlySettled
from stompbroker.broker.engine.redis.shared_bytes import END_SIZED, byte_counter
from stompbroker.broker.routing.destinations import QUEUE_PREFIX
from stompbroker.protocol.message import Message

__all__ = ["QueueSettling", "SettlingQueue"]


class SettlingQueue(Protocol):
    """What :class:`QueueSettling` needs of the queue that holds it."""

    @property
    def aside(self) -> Aside | None:
        """What the queue put aside while its node may have lapsed, or ``None``."""

    def lane(self, message: Message) -> str:
        """:returns: the stream a message goes to: the queue's, or its priority's lane."""


class QueueSettling:
    """
    The entries a node holds of a queue's streams, and their ending.

    An entry is keyed by its id in the queue's stream, or by ``(stream, id)``
    in another of the queue's streams (a lane, the node's own stream).

    :param engine: the :class:`~stompbroker.broker.engine.redis.engine.RedisEngine`.
    :param stream: the queue's stream.
    :param queue: the queue that holds it.
    """

    __slots__ = (
        "_engine",
        "_stream",
        "_queue",
        "_entries",
        "_settled",
        "_settled_elsewhere",
        "_recent",
        "_destination",
    )

    def __init__(self, engine: Any, stream: str, queue: SettlingQueue) -> None:
        self._engine = engine
        self._stream = stream
        self._queue = queue
        #: message-id -> its entry's key, for what this node has read and not settled.
        self._entries: dict[str, Any] = {}
        #: Entries settled this turn of the loop, ended together (:meth:`end_settled`).
        self._settled: list[bytes] = []
        #: ``(stream, entry id)`` of entries of other streams settled this turn.
        self._settled_elsewhere: list[tuple[str, bytes]] = []
        #: What this node ended lately, of any of the queue's streams (keyed as
        #: in :attr:`_entries`), so that Redis handing it out again ends it.
        self._recent = RecentlySettled()
        #: The ``/queue/`` whose stream it is (a policy's byte limit may apply), or ``None``.
        destination = engine.names.destination_of(stream)
        self._destination = destination if destination.startswith(QUEUE_PREFIX) else None

    def key(self, stream: str | None, entry_id: bytes) -> Any:
        """:returns: an entry's key: its id, or ``(stream, id)`` in another stream."""
        return entry_id if stream is None or stream == self._stream else (stream, entry_id)

    def hold(self, message_id: str, key: Any) -> None:
        """Remember the entry of a message this node has read and put in its local queue."""
        self._entries[message_id] = key

    def held(self) -> dict[str, Any]:
        """:returns: message-id -> entry key of what this node holds (not to be written)."""
        return self._entries

    def forget(self, message_id: str) -> None:
        """Forget a message's entry, neither ended nor given back (another node took it)."""
        del self._entries[message_id]

    def accounted(self) -> int:
        """:returns: how many entries of its pending lists the node holds or is ending."""
        return len(self._entries) + len(self._settled) + len(self._settled_elsewhere)

    def settle(self, message: Message) -> None:
        """End a message's entry, with the others settled in this turn of the loop."""
        entry = self._entries.pop(message.message_id, None)
        if entry is not None:
            recent = self._recent
            recent.ended(entry)
            recent.acknowledged(message.message_id)
            if not self._settled and not self._settled_elsewhere:
                self._engine.loop.call_soon(self.end_settled)
            if type(entry) is bytes:
                self._settled.append(entry)
            else:
                self._settled_elsewhere.append(entry)

    def end_settled(self) -> None:
        """
        One ``XACK`` and one ``XDEL`` for every entry settled since the last; none
        while the node may have lapsed (another node may hold them now): those
        wait, aside, for the queue's ``unfence``.
        """
        entries = self._settled
        if self._engine.liveness.lapsing():
            aside = self._queue.aside
            if aside is not None:
                aside.settled += [*entries, *self._settled_elsewhere]
                self._settled, self._settled_elsewhere = [], []
                return
        writer = self._engine.writer
        sized = self._sized()
        if entries:
            self._settled = []
            writer.command("XACK", self._stream, self._engine.names.group, *entries)
            if sized:
                self._end_sized(self._stream, entries)
            else:
                writer.command("XDEL", self._stream, *entries)
        if self._settled_elsewhere:
            elsewhere, self._settled_elsewhere = self._settled_elsewhere, []
            for stream, entry in elsewhere:
                writer.command("XACK", stream, self._engine.names.group, entry)
                if sized:
                    self._end_sized(stream, [entry])
                else:
                    writer.command("XDEL", stream, entry)

    def _sized(self) -> bool:
        """Whether a policy's ``max-length-bytes`` applies to the queue (:mod:`.shared_bytes`)."""
        if self._destination is None:
            return False
        limit = self._engine.limits.of(self._destination)
        return limit is not None and limit.max_bytes is not None

    def _end_sized(self, stream: str, entries: list[bytes]) -> None:
        """Delete entries, taking their bodies' bytes off the stream's byte count."""
        prefix = self._engine.names.prefix
        counter = byte_counter(prefix, stream)
        self._engine.writer.command("EVAL", END_SIZED, 2, stream, counter, *entries)

    def give_back(self, messages: list[Message]) -> None:
        """Put messages this node read back at the tail of the stream for the other nodes."""
        engine = self._engine
        writer = engine.writer
        lane = self._queue.lane
        # What comes back from this node's own stream (a decided queue's) was
        # counted out of its lane's byte count when it was moved there.
        own = f"{engine.names.prefix}:qn:" if messages and self._sized() else None
        for message in messages:
            entry = self._entries.pop(message.message_id, None)
            target = lane(message)
            writer.command("XADD", target, "*", "m", encode(engine.ids.node, message))
            if entry is not None:
                self._recent.ended(entry)
                stream = self._stream
                if type(entry) is not bytes:
                    stream, entry = entry
                    if own is not None and stream.startswith(own):
                        counter = byte_counter(engine.names.prefix, target)
                        writer.command("INCRBY", counter, len(message.body))
                writer.command("XACK", stream, engine.names.group, entry)
                writer.command("XDEL", stream, entry)

    def give_back_held(self, cluster: ClusterDispatch) -> None:
        """Put back the entries no consumer took at the tail of the stream, for the others."""
        writer = self._engine.writer
        group = self._engine.names.group
        held, cluster.held = cluster.held, []
        for stream, entry, payload in held:
            self._recent.ended(self.key(stream, entry))
            writer.command("XADD", self._stream, "*", "m", payload)
            writer.command("XACK", stream, group, entry)
            writer.command("XDEL", stream, entry)

    def end(self, entries: list[Any]) -> None:
        """
        End entries this node will not deliver (copies of what it holds or settled).

        :param entries: keyed as :meth:`key` keys them.
        """
        recent = self._recent
        streams: dict[str, list[bytes]] = {}
        for entry in entries:
            recent.ended(entry)
            stream, entry_id = (self._stream, entry) if type(entry) is bytes else entry
            streams.setdefault(stream, []).append(entry_id)
        writer = self._engine.writer
        group = self._engine.names.group
        for stream, ids in streams.items():
            writer.command("XACK", stream, group, *ids)
            writer.command("XDEL", stream, *ids)

    def fresh(
        self, entries: list[Any], stream: str | None, cluster: ClusterDispatch | None
    ) -> list[tuple[bytes, Any, Message]]:
        """
        Sort entries read, claimed or found in a pending list: those this node
        holds already, or holds back for no consumer accepting them
        (:mod:`.dispatch`), are left as they are; deleted ones, second copies of a
        message held here, and those ended or settled here lately are ended again.

        :returns: the others, ``(entry id, fields, message)``.
        """
        held = self._entries
        recent = self._recent
        waiting = {(s, e) for s, e, _ in cluster.held} if cluster is not None else set()
        stale: list[Any] = []
        fresh: list[tuple[bytes, Any, Message]] = []
        seen: set[str] = set()
        for entry_id, fields in entries:
            key = self.key(stream, entry_id)
            if not fields:
                # Deleted (XDEL) while pending: its XACK was lost.
                stale.append(key)
                continue
            if (stream or self._stream, entry_id) in waiting:
                continue
            _, message = decode(fields[b"m"])
            message_id = message.message_id
            holding = held.get(message_id)
            if holding is not None:
                if holding != key:
                    stale.append(key)
                continue
            if message_id in seen or recent.knows(key, message_id):
                stale.append(key)
                continue
            seen.add(message_id)
            fresh.append((entry_id, fields, message))
        if stale:
            self.end(stale)
        return fresh
