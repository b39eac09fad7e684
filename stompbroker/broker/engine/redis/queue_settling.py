"""
What ends a shared queue's stream entries: settling, putting back, and ending copies.

A :class:`~stompbroker.broker.engine.redis.stream_queue.StreamQueue` holds one
:class:`QueueSettling`: the entries its node has read and not settled, what it
settled this turn of the loop (ended together, ``XACK`` and ``XDEL`` in one
pipeline with the writes around them), and what it ended lately
(:class:`~stompbroker.broker.engine.redis.settled.RecentlySettled`), so that an
entry Redis hands out again is ended, not delivered.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Protocol

from stompbroker.broker.engine.redis.cluster_dispatch import ClusterDispatch
from stompbroker.broker.engine.redis.codec import decode, decode_message, encode_entry
from stompbroker.broker.engine.redis.connection import RedisUnreachable
from stompbroker.broker.engine.redis.keys import (
    byte_counter,
    is_node_stream,
    is_returned_stream,
    record_key,
)
from stompbroker.broker.engine.redis.lapse import Aside
from stompbroker.broker.engine.redis.redelivery_records import fold
from stompbroker.broker.engine.redis.settle_scripts import (
    GIVE_BACK,
    SETTLE,
    SETTLE_BATCH,
)
from stompbroker.broker.engine.redis.settled import RecentlySettled
from stompbroker.broker.routing.destinations import QUEUE_PREFIX
from stompbroker.logs import logger
from stompbroker.protocol.message import Message

__all__ = ["QueueSettling", "SettlingQueue"]


def _by_stream(entries: list[tuple[str, bytes]]) -> dict[str, list[bytes]]:
    """:returns: entry ids of ``(stream, id)`` pairs, by stream, in order."""
    streams: dict[str, list[bytes]] = {}
    for stream, entry_id in entries:
        streams.setdefault(stream, []).append(entry_id)
    return streams


def _unsure(failure: Any) -> None:
    """
    Redis is away past the hold (the script stays queued and runs when it is
    back, unanswered here), or refused it (the writer logged that).
    """
    failure.trap(RedisUnreachable)


log = logger("stompbroker.broker.engine.redis")


class SettlingQueue(Protocol):
    """What :class:`QueueSettling` needs of the queue that holds it."""

    #: Its destination, whose counters count what it drops.
    destination: str

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
        "_recorded",
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
        #: Keys of the entries whose redelivery count this node keeps in Redis.
        self._recorded: set[Any] = set()
        #: The ``/queue/`` whose stream it is (a policy's byte limit may apply), or ``None``.
        destination = engine.names.destination_of(stream)
        self._destination = destination if destination.startswith(QUEUE_PREFIX) else None

    def key(self, stream: str | None, entry_id: bytes) -> Any:
        """:returns: an entry's key: its id, or ``(stream, id)`` in another stream."""
        return entry_id if stream is None or stream == self._stream else (stream, entry_id)

    def hold(self, message_id: str, key: Any) -> None:
        """Remember the entry of a message this node has read and put in its local queue."""
        self._entries[message_id] = key

    def other(self, stream: str | None) -> str | None:
        """:returns: ``stream`` as :meth:`key` keys with it; ``None`` for the queue's own."""
        return None if stream is None or stream == self._stream else stream

    def held(self) -> dict[str, Any]:
        """
        :returns: message-id -> entry key of what this node holds: only the
            intake adds to it (:meth:`.QueueIntake.take`, as :meth:`hold` does).
        """
        return self._entries

    def forget(self, message_id: str) -> None:
        """Forget a message's entry, neither ended nor given back (another node took it)."""
        self._recorded.discard(self._entries.pop(message_id))

    def accounted(self) -> int:
        """:returns: how many entries of its pending lists the node holds or is ending."""
        return len(self._entries) + len(self._settled) + len(self._settled_elsewhere)

    def settle(self, message: Message) -> None:
        """End a message's entry, with the others settled in this turn of the loop."""
        self.settle_all((message,))

    def settle_all(self, messages: Iterable[Message]) -> bool:
        """
        End the entries of messages (an ACK's), with the others settled in this
        turn of the loop.  Each is remembered by its message-id only: a copy
        of its entry that Redis hands out again decodes to that id
        (:meth:`fresh`), as a copy of the message under another entry does.

        :returns: whether any of them is persistent.
        """
        # Mostly one message (an ACK in client-individual mode): nothing bound ahead.
        persistent = False
        for message in messages:
            if message.persistent:
                persistent = True
            entry = self._entries.pop(message.message_id, None)
            if entry is None:
                continue
            self._recent.acknowledged(message.message_id)
            if not self._settled and not self._settled_elsewhere:
                self._engine.loop.call_soon(self.end_settled)
            if type(entry) is bytes:
                self._settled.append(entry)
            else:
                self._settled_elsewhere.append(entry)
        return persistent

    def end_settled(self) -> None:
        """
        End every entry settled since the last (:data:`SETTLE`, one script per
        stream and batch); none while the node may have lapsed (another node
        may hold them now): those wait, aside, for the queue's ``unfence``.
        """
        entries = self._settled
        if self._engine.liveness.lapsing():
            aside = self._queue.aside
            if aside is not None:
                aside.settled += [*entries, *self._settled_elsewhere]
                self._settled, self._settled_elsewhere = [], []
                return
        if entries:
            self._settled = []
            self._end_owned(self._stream, entries)
        if self._settled_elsewhere:
            elsewhere, self._settled_elsewhere = self._settled_elsewhere, []
            for stream, ids in _by_stream(elsewhere).items():
                self._end_owned(stream, ids)

    def _end_owned(self, stream: str, ids: list[bytes]) -> None:
        """
        End entries of one stream, but those another node holds now (:data:`SETTLE`):
        the script answers which, and they are forgotten here with a warning.
        """
        engine = self._engine
        records = self._unrecord(stream, ids)
        keys = [stream, record_key(engine.ids.node, stream), engine.liveness.key]
        if self._sized():
            # The byte counter too: the script takes the bodies' bytes off it.
            keys.append(byte_counter(stream))
        for start in range(0, len(ids), SETTLE_BATCH):
            reply = engine.writer.command_waited(
                "EVALSHA",
                SETTLE,
                len(keys),
                *keys,
                engine.names.group,
                engine.ids.node,
                records,
                engine.liveness.epoch,
                *ids[start : start + SETTLE_BATCH],
            )
            reply.addCallbacks(self._ended, _unsure)

    def _sized(self) -> bool:
        """Whether a policy's ``max-length-bytes`` applies to the queue (:mod:`.shared_bytes`)."""
        if self._destination is None:
            return False
        limit = self._engine.limits.of(self._destination)
        return limit is not None and limit.max_bytes is not None

    def _ended(self, foreign: Any) -> None:
        """:param foreign: the entries :data:`SETTLE` left to the nodes that hold them."""
        if foreign:
            self._engine.liveness.foreign_settled(len(foreign), self._queue.destination)

    def _unrecord(self, stream: str, ids: list[bytes]) -> int:
        """
        Forget the redelivery records (:mod:`.redelivery_records`) of entries ended.

        :returns: 1 if any of them had one (the script removes them too), else 0.
        """
        recorded = self._recorded
        if not recorded:
            return 0
        had = 0
        for entry_id in ids:
            key = self.key(stream, entry_id)
            if key in recorded:
                recorded.discard(key)
                had = 1
        return had

    def record(self, messages: list[Message]) -> None:
        """
        Keep in Redis the redelivery counts of messages this node's consumers sent
        back (NACK, a consumer that left), so that a node that claims their entries
        after this one dies counts on from there (:mod:`.redelivery_records`).

        :param messages: as they were delivered; each now counts one more.
        """
        engine = self._engine
        held = self._entries
        for message in messages:
            key = held.get(message.message_id)
            if key is None:
                continue  # dead-lettered, or not this node's any more
            stream, entry_id = (self._stream, key) if type(key) is bytes else key
            hash_key = record_key(engine.ids.node, stream)
            engine.writer.command("HSET", hash_key, entry_id, message.redeliveries + 1)
            self._recorded.add(key)

    def record_claimed(self, stream: str, entries: list[Any]) -> None:
        """
        Keep in Redis the counts of entries claimed from a dead node that had
        recorded theirs (:mod:`.redelivery_records`), for those this node took:
        Redis's delivery count alone would not say as much if this node dies too.

        :param entries: ``(entry id, fields)`` as taken, the count in the payload.
        """
        engine = self._engine
        hash_key = record_key(engine.ids.node, stream)
        for entry_id, fields in entries:
            _, message = decode(fields[b"m"])
            key = self.key(stream, entry_id)
            if self._entries.get(message.message_id) == key:
                engine.writer.command("HSET", hash_key, entry_id, message.redeliveries)
                self._recorded.add(key)

    def give_back(self, messages: list[Message]) -> None:
        """
        Put messages this node read back at the tail of the stream for the other
        nodes (:data:`GIVE_BACK`: but those whose entries another node holds now;
        :meth:`_back_to`).
        """
        engine = self._engine
        lane = self._queue.lane
        prefix = engine.names.prefix
        # What comes back from this node's own stream (a decided queue's) was
        # counted out of its lane's byte count when it was moved there.
        sized = bool(messages) and self._sized()
        by_source: dict[str, list[Any]] = {}
        for message in messages:
            entry = self._entries.pop(message.message_id, None)
            payload = encode_entry(engine.ids.node, message)
            if entry is None:
                engine.writer.command("XADD", lane(message), "*", "m", payload)
                continue
            self._recent.ended(entry)
            stream, entry_id = (self._stream, entry) if type(entry) is bytes else entry
            target = self._back_to(stream, message)
            counted = sized and is_node_stream(prefix, stream)
            counter = byte_counter(target) if counted else ""
            given = (entry_id, target, payload, counter, len(message.body))
            by_source.setdefault(stream, []).append(given)
        for stream, given_back in by_source.items():
            self._give_back_owned(stream, given_back)

    def give_back_grouped(
        self,
        cluster: ClusterDispatch,
        messages: list[Message],
        leavers: list[str],
        *,
        leaving: bool = False,
        held: bool = False,
    ) -> None:
        """
        A grouped queue's give-back: messages this node read (and, with
        ``held``, the entries no consumer took) to the queue's returned stream,
        decided before any newer message of their groups, as one node puts
        them back at the head; the consumers that leave unregistered in the same
        script (:meth:`.ClusterDispatch.give_back`).

        :param messages: in the order they go back: a consumer's unacknowledged
            ones first, then those waiting here.
        :param leavers: the registry fields of the consumers that leave.
        :param leaving: this node's last consumer of the queue left.
        """
        engine = self._engine
        recent = self._recent
        flat: list[Any] = []
        for message in messages:
            entry = self._entries.pop(message.message_id, None)
            payload = encode_entry(engine.ids.node, message)
            if entry is None:
                flat += ["", "", payload, 0]
                continue
            recent.ended(entry)
            stream, entry_id = (self._stream, entry) if type(entry) is bytes else entry
            flat += [stream, entry_id, payload, self._unrecord(stream, [entry_id])]
        if held:
            waiting, cluster.held = cluster.held, []
            for stream, entry_id, payload in waiting:
                recent.ended(self.key(stream, entry_id))
                flat += [stream, entry_id, payload, self._unrecord(stream, [entry_id])]
        reply = cluster.give_back(flat, leavers, leaving)
        reply.addCallbacks(self._ended, _unsure)

    def give_back_held(self, cluster: ClusterDispatch) -> None:
        """Put back the entries no consumer took at the tail of their lane (:meth:`_back_to`)."""
        held, cluster.held = cluster.held, []
        by_source: dict[str, list[Any]] = {}
        for stream, entry, payload in held:
            self._recent.ended(self.key(stream, entry))
            target = self._back_to(stream, decode(payload)[1])
            by_source.setdefault(stream, []).append((entry, target, payload, "", 0))
        for stream, given in by_source.items():
            self._give_back_owned(stream, given)

    def _back_to(self, stream: str, message: Message) -> str:
        """
        :returns: where a message read from ``stream`` goes back: the tail of
            its lane; one read from a grouped queue's returned stream, to that
            stream's tail, which the deciding node reads before any lane, so
            that it still comes before its group's newer messages.
        """
        if is_returned_stream(self._engine.names.prefix, stream):
            return stream
        return self._queue.lane(message)

    def _give_back_owned(self, stream: str, given: list[tuple[Any, ...]]) -> None:
        """
        One :data:`GIVE_BACK` per batch of a stream's ``(entry id, target stream,
        payload, counter or '', body size)``.
        """
        engine = self._engine
        records = self._unrecord(stream, [entry[0] for entry in given])
        for start in range(0, len(given), SETTLE_BATCH):
            args: list[Any] = []
            for entry in given[start : start + SETTLE_BATCH]:
                args += entry
            reply = engine.writer.command_waited(
                "EVALSHA",
                GIVE_BACK,
                3,
                stream,
                record_key(engine.ids.node, stream),
                engine.liveness.key,
                engine.names.group,
                engine.ids.node,
                records,
                engine.liveness.epoch,
                *args,
            )
            reply.addCallbacks(self._ended, _unsure)

    def end(self, entries: list[Any]) -> None:
        """
        End entries this node will not deliver (copies of what it holds or settled),
        but those another node holds now (:data:`SETTLE`).

        :param entries: keyed as :meth:`key` keys them.
        """
        recent = self._recent
        streams: dict[str, list[bytes]] = {}
        for entry in entries:
            recent.ended(entry)
            stream, entry_id = (self._stream, entry) if type(entry) is bytes else entry
            streams.setdefault(stream, []).append(entry_id)
        for stream, ids in streams.items():
            self._end_owned(stream, ids)

    def _unreadable(self, stream: str, entry_id: bytes, error: Exception) -> None:
        """
        An entry no node can make a message of (damaged, or added by something
        else than a node): logged, counted as dropped for the queue, and ended
        with the stale.
        """
        engine = self._engine
        engine.counters.discarded += 1
        engine.traffic.of(self._queue.destination).messages_dropped += 1
        log.error(
            "discarded entry {entry} of {stream}: it holds no message a node can read ({error})",
            entry=entry_id.decode(errors="replace"),
            stream=stream,
            error=str(error) if not isinstance(error, KeyError) else "no field m",
        )

    def fresh(
        self, entries: list[Any], stream: str | None, cluster: ClusterDispatch | None
    ) -> list[tuple[bytes, Any, Message]]:
        """
        Sort entries read, claimed or found in a pending list: those this node
        holds already, or holds back for no consumer accepting them
        (:mod:`.dispatch`), are left as they are; deleted ones, second copies of a
        message held here, and those ended or settled here lately are ended again;
        one that holds no message a node can read is ended too, and counted
        as dropped.

        :returns: the others, ``(entry id, fields, message)``.
        """
        held = self._entries
        recent = self._recent
        name = stream or self._stream
        own = name == self._stream
        waiting = None
        if cluster is not None and cluster.held:
            waiting = {(s, e) for s, e, _ in cluster.held}
        stale: list[Any] = []
        fresh: list[tuple[bytes, Any, Message]] = []
        seen: set[str] = set()
        known = recent.knows
        for entry_id, fields in entries:
            if not fields:
                # Deleted (XDEL) while pending: its XACK was lost.
                stale.append(entry_id if own else (name, entry_id))
                continue
            if waiting is not None and (name, entry_id) in waiting:
                continue
            key = entry_id if own else (name, entry_id)
            try:
                message = decode_message(fields[b"m"])
            except (KeyError, ValueError) as error:
                self._unreadable(name, entry_id, error)
                stale.append(key)
                continue
            if b"r" in fields:
                # Handed back by a node that had delivered it (dispatch_scripts.RETURN_NODE):
                # its count goes into the payload, which is all a move carries.
                fields = fold(fields)
                message = decode_message(fields[b"m"])
            message_id = message.message_id
            holding = held.get(message_id)
            if holding is not None:
                if holding != key:
                    stale.append(key)
                continue
            if message_id in seen or known(key, message_id):
                stale.append(key)
                continue
            seen.add(message_id)
            fresh.append((entry_id, fields, message))
        if stale:
            self.end(stale)
        return fresh
