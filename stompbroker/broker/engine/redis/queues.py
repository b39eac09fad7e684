"""
A queue shared by every node: a Redis stream with one consumer group.

Every node that has consumers on ``/queue/NAME`` holds a :class:`StreamQueue`
for it, a consumer named after the node in the stream's one group.  The queue
reads (``XREADGROUP ... >``) only as many entries as its local consumers have
room for in their windows, less what it holds already, so a node never takes
more than it can hand out: each message goes to one consumer cluster-wide, and
prefetch windows mean what they mean on one node.  What it reads goes into a
local :class:`~stompbroker.broker.queueing.queues.WorkerQueue` it holds:
round-robin, windows, ack modes, NACK and redelivery counts, dead letters,
expiry.  Settling a message ends its entry (``XACK`` and ``XDEL``, in one
pipeline with the writes around it).

While a node holds an entry (read, not yet acknowledged) it is in the group's
pending list under the node's name.  When the node leaves the queue (its last
local consumer unsubscribes), what it holds is put back at the tail of the
stream (``XADD`` of the message, ``XACK``/``XDEL`` of the old entry) for the
other nodes.  When the node dies, its entries stay pending until another node
sees that its liveness key has expired and claims them (``XCLAIM``; see
:meth:`StreamQueue.claim_from_dead`).

Redis going away costs no entry and delivers none twice without
``redelivered:true``:

- a read whose reply died with the connection leaves entries in the node's
  pending list that the node never received: after every reconnect, and when
  the slow check (:meth:`StreamQueue.check_pending`, every half
  ``--node-timeout``) finds the pending list longer than what the node holds,
  the node reads its own pending list (``XREADGROUP ... 0``) and takes what it
  does not hold (:meth:`StreamQueue.reconcile`), as redelivered;
- an entry Redis hands out again (a restart that rolled the group back, a
  second copy of a message under another entry id) is ended, not delivered,
  when the node holds its message or settled it lately
  (:class:`~stompbroker.broker.engine.redis.settled.RecentlySettled`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

from redis.exceptions import ResponseError
from twisted.internet.defer import Deferred
from zope.interface import implementer

from stompbroker.broker.engine.base import IQueue
from stompbroker.broker.engine.redis.codec import decode, encode
from stompbroker.broker.engine.redis.connection import BACKOFF_BASE, BACKOFF_CAP, CONNECTION_ERRORS
from stompbroker.broker.engine.redis.dispatch import ClusterDispatch
from stompbroker.broker.engine.redis.lanes import LaneMarks
from stompbroker.broker.engine.redis.own_pending import pending_count, pending_pages
from stompbroker.broker.engine.redis.queue_reading import QueueReading
from stompbroker.broker.engine.redis.settled import RecentlySettled
from stompbroker.broker.features.selectors import Selector
from stompbroker.broker.queueing.delivery import Consumer
from stompbroker.broker.queueing.priorities import DEFAULT_PRIORITY
from stompbroker.broker.queueing.queues import WorkerQueue
from stompbroker.broker.store.journal import durable_key
from stompbroker.logs import logger
from stompbroker.protocol.frames import Headers
from stompbroker.protocol.message import Message

__all__ = ["StreamQueue"]

log = logger("stompbroker.broker.engine.redis")

#: Most entries one read takes; an ``auto`` consumer counts for this much room.
MAX_READ = 500


def _stored(reply: Any) -> bool:
    return True


def _not_stored(failure: Any) -> bool:
    return False


@implementer(IQueue)
class StreamQueue:
    """
    This node's handle on a queue whose messages live in a Redis stream: a
    ``/queue/`` destination's, or a durable subscription's backlog.

    It holds a local :class:`~stompbroker.broker.queueing.queues.WorkerQueue`
    (:attr:`local`) for what it has read: that queue's consumers settle with
    this handle (it is their ``owner``), and tell it of each message that
    leaves for good otherwise (``left``), so each settled message ends its
    entry here.

    :param destination: the ``/queue/`` destination, or a durable
        subscription's topic pattern.
    :param engine: the :class:`~stompbroker.broker.engine.redis.engine.RedisEngine`.
    :param durable: ``(client-id, name)`` for a durable subscription's backlog.

    :ivar local: the local queue of what this node has read and not settled.
    :ivar durable: ``(client-id, name)``, or ``None`` for a ``/queue/``.
    :ivar key: the durable subscription's key in the registry, or ``None``.
    """

    __slots__ = (
        "destination",
        "local",
        "durable",
        "key",
        "_engine",
        "_traffic",
        "_stream",
        "_entries",
        "_reader",
        "_wake",
        "_closed",
        "_settled",
        "_settled_elsewhere",
        "_reading",
        "_cluster",
        "_recent",
        "_reconcile_due",
        "_check_due",
        "_held_until",
    )

    #: No message store: Redis keeps its messages (see the local queue's).
    store_key = None

    def __init__(
        self, destination: str, engine: Any, durable: tuple[str, str] | None = None
    ) -> None:
        self.destination = destination
        self.local = WorkerQueue(
            destination,
            engine.clock,
            engine.policy,
            engine.counters,
            engine.dead_letters.dead_letter,
            traffic=engine.traffic,
            owner=self,
            left=self._settle,
        )
        self.durable = durable
        self.key = None if durable is None else durable_key(durable)
        self._engine = engine
        self._traffic = engine.traffic
        names = engine.names
        self._stream: str = (
            names.queue(destination) if self.key is None else names.durable(self.key)
        )
        #: message-id -> its stream entry id, for what this node has read and not
        #: settled; ``(stream, entry id)`` for an entry of another stream (a lane).
        self._entries: dict[str, Any] = {}
        self._reader: asyncio.Task[None] | None = None
        self._wake = asyncio.Event()
        self._closed = False
        #: Entries settled this turn of the loop, ended together (:meth:`_end_settled`).
        self._settled: list[bytes] = []
        #: ``(stream, entry id)`` of entries of other streams settled this turn.
        self._settled_elsewhere: list[tuple[str, bytes]] = []
        #: How this node reads the queue: its stream, or its priority lanes.
        #: Who gets what across the nodes, for a ``/queue/`` (:mod:`.dispatch`).
        self._cluster: ClusterDispatch | None = None
        if durable is None:
            self._cluster = ClusterDispatch(
                engine, destination, self._stream, lambda: self._room() > 0
            )
        self._reading = QueueReading(
            engine,
            destination if durable is None else None,
            self._stream,
            self._cluster,
            screen=self._screen,
        )
        #: What this node ended lately, of any of the queue's streams (keyed as
        #: in :attr:`_entries`), so that Redis handing it out again ends it.
        self._recent = RecentlySettled()
        #: The reader reads the node's own pending lists before it reads on: at
        #: the start, and after each reconnect.
        self._reconcile_due = True
        #: The reader compares the pending lists' length with what the node holds.
        self._check_due = False
        #: Until when (the clock's seconds) the reader reads nothing: another node
        #: acts on the stream (:meth:`give_back_for`).
        self._held_until = 0.0

    def __repr__(self) -> str:
        if self.key is not None:
            return f"<StreamQueue {self.key!r} on {self.destination!r}>"
        return (
            f"<StreamQueue {self.destination!r}: {len(self.pending)} read here,"
            f" {len(self.consumers)} consumers>"
        )

    @property
    def stream(self) -> str:
        """The Redis key of its stream."""
        return self._stream

    @property
    def pending(self) -> Any:
        """What this node has read and not handed out, in order."""
        return self.local.pending

    @property
    def consumers(self) -> list[Consumer]:
        """This node's consumers."""
        return self.local.consumers

    # -- what an operator may see and take (of what this node has read) -------------

    def is_idle(self) -> bool:
        """:returns: whether this node holds nothing of it and consumes nothing."""
        return self.local.is_idle()

    def browse(self, count: int) -> list[Message]:
        """:returns: the first ``count`` messages this node has read and not handed out."""
        return self.local.browse(count)

    def purge(self) -> int:
        """Discard what this node has read and not handed out (see the local queue's)."""
        return self.local.purge()

    def deliver_copies(self, body: bytes, headers: Headers, message_ids: Iterator[str]) -> int:
        """Give each local consumer with room a copy of a message (``/queue/monitor``)."""
        return self.local.deliver_copies(body, headers, message_ids)

    def count_deliveries(self, count: int, tails: dict[str, int]) -> None:
        """Nothing to count: the local queue counts its deliveries as it hands them out."""

    # -- what goes into the stream ---------------------------------------------------

    def publish(self, message: Message) -> None:
        """Add a message sent to this queue to its stream, counting it in."""
        self._traffic.published(message)
        self.enqueue(message)

    def enqueue(self, message: Message) -> None:
        """Add a message (a dead letter, a reply) to the stream, for any node's consumers."""
        engine = self._engine
        payload = encode(engine.ids.node, message)
        engine.writer.command("XADD", self._lane(message), "*", "m", payload)

    def _lane(self, message: Message) -> str:
        """:returns: the stream a message goes to: the queue's, or its priority's lane."""
        if message.priority == DEFAULT_PRIORITY or self.key is not None:
            return self._stream
        engine = self._engine
        lanes: LaneMarks = engine.lanes
        return lanes.stream(engine.writer, self.destination, self._stream, message.priority)

    def deliver(self, message: Message) -> None:
        """As :meth:`enqueue` (a topic's fan-out reaching a queue)."""
        self.enqueue(message)

    def _was_closed(self) -> bool:
        """
        Whether the queue was closed meanwhile: read through a call so that a check
        made before an ``await`` is not taken (by mypy) to still hold after it.
        """
        return self._closed

    # -- consumers ------------------------------------------------------------------------

    def add_consumer(
        self,
        subscriber: Any,
        window: int,
        max_redeliveries: int,
        *,
        selector: Selector | None = None,
        options: Any = None,
    ) -> Consumer:
        """
        Start handing messages to a local subscriber; the first starts the reading.

        A ``/queue/``'s consumer is registered in Redis with its selector and
        options, so that every node's reads give it what it should get
        (:mod:`~stompbroker.broker.engine.redis.dispatch`); among this node's
        consumers, the local queue chooses by the one-node rules.  Counted in the
        statistics again after a consumerless spell.
        """
        self._traffic.queues.add(self.local)
        consumer = self.local.add_consumer(
            subscriber, window, max_redeliveries, selector=selector, options=options
        )
        if self._cluster is not None:
            self._cluster.register(
                consumer, selector, options, MAX_READ if consumer.auto else window
            )
        self._closed = False
        if self._reader is None:
            self._reader = self._engine.loop.create_task(self._read())
        self._wake.set()
        return consumer

    def remove_consumer(self, consumer: Consumer) -> None:
        """
        Stop handing messages to a consumer; what it holds goes to the other local
        consumers, or back to the stream if it was the last (with the NACKed
        messages that wait here for their redelivery, which then go at once).
        """
        self.local.remove_consumer(consumer)
        self._wake.set()
        cluster = self._cluster
        if cluster is not None:
            cluster.unregister(consumer)
            if cluster.active and self.consumers:
                # What it held may be for other nodes' consumers now: decided again.
                self._give_back(list(self.pending))
                self.pending.clear()
        if not self.consumers:
            self._give_back([*self.pending, *self._delayed()])
            self.pending.clear()
            if cluster is not None:
                self._give_back_held(cluster)
                cluster.leave()

    def dispatch(self) -> None:
        """Hand out what was read, and let the reader read more if there is room."""
        self.local.dispatch()
        self._wake.set()

    # -- settling ---------------------------------------------------------------------

    def acknowledge(self, consumer: Consumer, messages: list[Message]) -> list[Any]:
        """
        Forget acknowledged messages: end their entries.

        :returns: for persistent ones, a Deferred that fires with whether Redis
            has the acknowledgement (so that the ACK's RECEIPT means it).
        """
        self.local.acknowledge(consumer, messages)
        self._wake.set()
        persistent = False
        for message in messages:
            self._settle(message)
            persistent = persistent or message.persistent
        if persistent:
            # The RECEIPT waits for the XACK: end the entries before the PING.
            self._end_settled()
            waited: Deferred[Any] = self._engine.writer.command_waited("PING")
            return [waited.addCallbacks(_stored, _not_stored)]
        return []

    def requeue(self, consumer: Consumer, messages: list[Message]) -> list[Any]:
        """Return messages to the local queue's head (see the local queue's)."""
        written = self.local.requeue(consumer, messages)
        self._wake.set()
        return written

    def reject(self, messages: list[Message]) -> list[Any]:
        """Dead-letter messages a consumer refused for good (see the local queue's)."""
        written = self.local.reject(messages)
        self._wake.set()
        return written

    def _settle(self, message: Message) -> None:
        """End a message's entry, with the others settled in this turn of the loop."""
        entry = self._entries.pop(message.message_id, None)
        if entry is not None:
            recent = self._recent
            recent.ended(entry)
            recent.acknowledged(message.message_id)
            if not self._settled and not self._settled_elsewhere:
                self._engine.loop.call_soon(self._end_settled)
            if type(entry) is bytes:
                self._settled.append(entry)
            else:
                self._settled_elsewhere.append(entry)

    def _end_settled(self) -> None:
        """One ``XACK`` and one ``XDEL`` for every entry settled since the last."""
        entries = self._settled
        writer = self._engine.writer
        if entries:
            self._settled = []
            writer.command("XACK", self._stream, self._engine.names.group, *entries)
            writer.command("XDEL", self._stream, *entries)
        if self._settled_elsewhere:
            elsewhere, self._settled_elsewhere = self._settled_elsewhere, []
            for stream, entry in elsewhere:
                writer.command("XACK", stream, self._engine.names.group, entry)
                writer.command("XDEL", stream, entry)

    def _delayed(self) -> list[Message]:
        """:returns: the NACKed messages waiting here for their redelivery, taken."""
        delayed = self.local.delayed
        return [] if delayed is None else delayed.take_all()

    def _give_back(self, messages: list[Message]) -> None:
        """Put messages this node read back at the tail of the stream for the other nodes."""
        engine = self._engine
        writer = engine.writer
        for message in messages:
            entry = self._entries.pop(message.message_id, None)
            writer.command("XADD", self._lane(message), "*", "m", encode(engine.ids.node, message))
            if entry is not None:
                self._recent.ended(entry)
                stream = self._stream
                if type(entry) is not bytes:
                    stream, entry = entry
                writer.command("XACK", stream, engine.names.group, entry)
                writer.command("XDEL", stream, entry)

    def _give_back_held(self, cluster: ClusterDispatch) -> None:
        """Put back the entries no consumer took at the tail of the stream, for the others."""
        writer = self._engine.writer
        group = self._engine.names.group
        held, cluster.held = cluster.held, []
        for stream, entry, payload in held:
            self._recent.ended(self._key(stream, entry))
            writer.command("XADD", self._stream, "*", "m", payload)
            writer.command("XACK", stream, group, entry)
            writer.command("XDEL", stream, entry)

    def _end(self, entries: list[Any]) -> None:
        """
        End entries this node will not deliver (copies of what it holds or settled).

        :param entries: keyed as in :attr:`_entries`.
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

    def close(self) -> None:
        """
        Drop this node's handle: what it has read and holds goes back to the stream
        (the queue itself lives on in Redis), and its reading stops.
        """
        held: list[Message] = []
        for consumer in self.consumers:
            held.extend(consumer.take_all())
        held.extend(self.pending)
        held.extend(self._delayed())
        self._give_back(held)
        if self._cluster is not None:
            for consumer in self.consumers:
                self._cluster.unregister(consumer)
            self._give_back_held(self._cluster)
            self._cluster.leave()
        self.consumers.clear()
        self.pending.clear()
        self._traffic.queues.discard(self.local)
        self.local.expiry.cancel()
        self._closed = True
        self._wake.set()

    # -- reading ---------------------------------------------------------------------------

    def give_back_for(self, seconds: float) -> list[Message]:
        """
        Another node acts on the whole stream (a purge, a move: :mod:`.queue_actions`):
        put what this node read ahead and did not hand out back at the tail of
        the stream, and read nothing more for ``seconds`` or until :meth:`resume`.

        :returns: the messages given back.
        """
        given = list(self.pending)
        self.pending.clear()
        self._give_back(given)
        clock = self._engine.clock
        self._held_until = clock.seconds() + seconds
        clock.callLater(seconds, self._wake.set)
        return given

    def resume(self) -> None:
        """The other node is done with the stream: read on."""
        self._held_until = 0.0
        self._wake.set()

    def _room(self) -> int:
        """:returns: how many more messages the local consumers can take now."""
        if self._held_until and self._held_until > self._engine.clock.seconds():
            return 0
        room = -len(self.pending)
        for consumer in self.consumers:
            if consumer.paused:
                continue
            room += MAX_READ if consumer.auto else consumer.window - len(consumer.unacked)
        return min(room, MAX_READ)

    def _key(self, stream: str | None, entry_id: bytes) -> Any:
        """:returns: an entry's key in :attr:`_entries`: its id, or ``(stream, id)`` elsewhere."""
        return entry_id if stream is None or stream == self._stream else (stream, entry_id)

    def _fresh(self, entries: list[Any], stream: str | None) -> list[tuple[bytes, Any, Message]]:
        """
        Sort entries read, claimed or found in a pending list: those this node
        holds already, or holds back for no consumer accepting them
        (:mod:`.dispatch`), are left as they are; deleted ones, second copies of a
        message held here, and those ended or settled here lately are ended again.

        :returns: the others, ``(entry id, fields, message)``.
        """
        held = self._entries
        recent = self._recent
        cluster = self._cluster
        waiting = {(s, e) for s, e, _ in cluster.held} if cluster is not None else set()
        stale: list[Any] = []
        fresh: list[tuple[bytes, Any, Message]] = []
        seen: set[str] = set()
        for entry_id, fields in entries:
            key = self._key(stream, entry_id)
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
            self._end(stale)
        return fresh

    def _screen(self, stream: str, entries: list[Any]) -> list[Any]:
        """:returns: the entries to decide among the nodes (:meth:`_fresh`'s, as read)."""
        return [(entry_id, fields) for entry_id, fields, _ in self._fresh(entries, stream)]

    def _take(
        self,
        entries: list[Any],
        redelivered: dict[bytes, int] | None = None,
        stream: str | None = None,
    ) -> int:
        """
        Put entries read or claimed from a stream (the queue's, a lane, or this
        node's own) in the local queue, but for those :meth:`_fresh` leaves or ends.

        :param redelivered: entry id -> times Redis delivered it, for entries
            taken from a pending list (1 if missing); ``None`` for a read of new ones.
        :returns: how many went into the local queue.
        """
        taken = 0
        for entry_id, fields, message in self._fresh(entries, stream):
            if b"r" in fields:
                # Handed back by a node that had delivered it (dispatch.RETURN_NODE).
                message.redeliveries += int(fields[b"r"])
            if redelivered is not None:
                message.redeliveries += redelivered.get(entry_id, 1)
            self._entries[message.message_id] = self._key(stream, entry_id)
            self.local.enqueue(message)
            taken += 1
        return taken

    # -- reconciling with Redis -------------------------------------------------------

    def reconnected(self) -> None:
        """Redis came back: read this node's pending lists before reading on."""
        self._reconcile_due = True
        self._wake.set()

    def check_pending(self) -> None:
        """Let the reader compare this node's pending lists with what it holds (a slow timer)."""
        self._check_due = True
        self._wake.set()

    def _accounted(self) -> int:
        """:returns: how many entries of its pending lists this node knows of."""
        cluster = self._cluster
        waiting = 0 if cluster is None else len(cluster.held)
        return len(self._entries) + len(self._settled) + len(self._settled_elsewhere) + waiting

    async def reconcile(self) -> int:
        """
        Take what this node's pending lists hold and the node does not: entries
        a read claimed whose reply never came (the connection died with it), in
        every stream it reads (the queue's or its lanes, and its own stream of
        the queue).  They count as redelivered (Redis delivered them once);
        while the queue's reads are decided (:mod:`.dispatch`), those of the
        queue's streams are decided first.  Runs in the reader, never beside a read.

        :returns: how many entries went into the local queue.
        """
        taken = 0
        for stream in self._reading.own_streams():
            async for page in pending_pages(self._engine, stream):
                taken += await self._reconciled(stream, page)
        if taken:
            log.info(
                "took {count} messages of {queue} from this node's pending list in Redis"
                " (read, but the reply was lost)",
                count=taken,
                queue=self.destination,
            )
        return taken

    async def _reconciled(self, stream: str, entries: list[Any]) -> int:
        """Take a page of this node's pending list of ``stream``; :returns: how many."""
        cluster = self._cluster
        if cluster is None or not cluster.active or stream == cluster.own:
            return self._take(entries, {}, stream)
        async with cluster.lock:
            return await self._claimed(entries, {}, stream)

    async def _reconcile_if_due(self) -> None:
        """Reconcile when due, or when the slow check finds entries the node does not hold."""
        if self._check_due and not self._reconcile_due:
            self._check_due = False
            streams = self._reading.own_streams()
            if await pending_count(self._engine, streams) > self._accounted():
                self._reconcile_due = True
        if self._reconcile_due:
            self._reconcile_due = False
            try:
                await self.reconcile()
            except BaseException:
                self._reconcile_due = True
                raise

    async def _read(self) -> None:
        """Read for the local consumers while there are any."""
        engine = self._engine
        delay = BACKOFF_BASE
        try:
            await self._make_group()
            await self.claim_from_dead()
            while self.consumers and not self._closed:
                self._wake.clear()
                try:
                    await self._reconcile_if_due()
                except CONNECTION_ERRORS:
                    await asyncio.sleep(delay)
                    delay = min(delay * 2, BACKOFF_CAP)
                    continue
                if self._was_closed():
                    self._give_back(list(self.pending))
                    self.pending.clear()
                    if self._cluster is not None:
                        self._give_back_held(self._cluster)
                    break
                room = self._reading.room(self._room())
                if room <= 0:
                    await self._wake.wait()
                    continue
                try:
                    reply = await self._reading.read(room)
                except ResponseError as error:
                    if "NOGROUP" not in str(error):
                        raise
                    await self._make_group()
                    continue
                except CONNECTION_ERRORS:
                    # The read may have reached Redis and its reply died: what it
                    # claimed waits in this node's pending list.
                    self._reconcile_due = True
                    await asyncio.sleep(delay)
                    delay = min(delay * 2, BACKOFF_CAP)
                    continue
                delay = BACKOFF_BASE
                if self._was_closed():
                    # Read after the handle was dropped: back for the others.
                    for stream, entries in reply:
                        self._take(entries, stream=stream)
                    self._give_back(list(self.pending))
                    self.pending.clear()
                    if self._cluster is not None:
                        self._give_back_held(self._cluster)
                    break
                for stream, entries in reply:
                    self._take(entries, stream=stream)
        except Exception:
            log.failure("reading {queue} from Redis failed", queue=self.destination)
        finally:
            self._reader = None
            if self.consumers and not self._closed:
                self._reader = engine.loop.create_task(self._read())

    async def _claimed(self, entries: list[Any], counts: dict[Any, int], stream: str) -> int:
        """
        Take entries claimed, or found in this node's pending list: while
        deciding, only those this node's consumers should get (the others go
        to their nodes), and none this node holds or settled lately.

        :param counts: entry id -> times Redis delivered it (1 if missing).
        :returns: how many went into the local queue.
        """
        cluster = self._cluster
        if cluster is not None and cluster.active:
            marked = [
                (entry_id, {**fields, b"r": counts.get(entry_id, 1)})
                for entry_id, fields in self._screen(stream, entries)
            ]
            taken = 0
            for taken_from, kept in await cluster.decide_locked([(stream, marked)]):
                taken += self._take(kept, stream=taken_from)
            return taken
        return self._take(entries, counts, stream)

    async def _make_group(self) -> None:
        """Make the stream and its group, from the start of the stream, unless they exist."""
        try:
            await self._engine.client.xgroup_create(
                self._stream, self._engine.names.group, id="0", mkstream=True
            )
        except ResponseError as error:
            if "BUSYGROUP" not in str(error):
                raise

    async def claim_from_dead(self) -> int:
        """
        Take over, for the local consumers, what dead nodes held of this queue:
        the pending entries of group consumers whose liveness key has expired,
        in the queue's stream and in its priority lanes.

        :returns: how many entries were claimed.
        """
        claimed = 0
        cluster = self._cluster
        if cluster is not None and cluster.active:
            async with cluster.lock:
                # Forgets dead nodes' consumers and groups, and hands back their own
                # streams; what they held is decided before any newer entry.
                await cluster.refresh()
                for stream in self._reading.streams():
                    claimed += await self._claim_stream(stream)
            return claimed
        for stream in self._reading.streams():
            claimed += await self._claim_stream(stream)
        return claimed

    async def _claim_stream(self, stream: str) -> int:
        """Take over what dead nodes held of one of the queue's streams."""
        engine = self._engine
        client = engine.client
        names = engine.names
        me = engine.ids.node
        claimed = 0
        try:
            summary = await client.xpending(stream, names.group)
        except ResponseError as error:
            if "NOGROUP" not in str(error):
                raise
            return 0  # a lane nobody has read yet
        for holder in summary.get("consumers") or ():
            name = holder["name"]
            name = name.decode() if isinstance(name, bytes) else name
            if name == me or await client.exists(names.alive(name)):
                continue
            room = self._room()
            if room <= 0:
                break
            rows = await client.xpending_range(
                stream, names.group, min="-", max="+", count=room, consumername=name
            )
            if not rows:
                await client.xgroup_delconsumer(stream, names.group, name)
                continue
            counts = {row["message_id"]: row["times_delivered"] for row in rows}
            entries = await client.xclaim(
                stream, names.group, me, min_idle_time=0, message_ids=list(counts)
            )
            await self._claimed(entries, counts, stream)
            claimed += len(entries)
            log.info(
                "took over {count} messages of {queue} from node {node}, which is gone",
                count=len(entries),
                queue=self.destination,
                node=name,
            )
        return claimed
