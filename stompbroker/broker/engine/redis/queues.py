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
from stompbroker.broker.engine.redis.settled import RecentlySettled
from stompbroker.broker.features.selectors import Selector
from stompbroker.broker.queueing.delivery import Consumer
from stompbroker.broker.queueing.queues import WorkerQueue
from stompbroker.broker.store.journal import durable_key
from stompbroker.logs import logger
from stompbroker.protocol.frames import Headers
from stompbroker.protocol.message import Message

__all__ = ["StreamQueue"]

log = logger("stompbroker.broker.engine.redis")

#: Most entries one read takes; an ``auto`` consumer counts for this much room.
MAX_READ = 500
#: Milliseconds a read waits on an empty stream before it looks at its consumers again.
READ_BLOCK_MS = 1000
#: Most entries of the node's own pending list one read of it takes (:meth:`StreamQueue.reconcile`).
RECONCILE_PAGE = 500


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
        #: message-id -> its stream entry id, for what this node has read and not settled.
        self._entries: dict[str, bytes] = {}
        self._reader: asyncio.Task[None] | None = None
        self._wake = asyncio.Event()
        self._closed = False
        #: Entries settled this turn of the loop, ended together (:meth:`_end_settled`).
        self._settled: list[bytes] = []
        #: What this node ended of the stream lately, so that Redis handing it out again ends it.
        self._recent = RecentlySettled()
        #: The reader reads the node's own pending list before it reads on: at
        #: the start, and after each reconnect.
        self._reconcile_due = True
        #: The reader compares the pending list's length with what the node holds.
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
        engine.writer.command("XADD", self._stream, "*", "m", encode(engine.ids.node, message))

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

        The broker gives it no selector and no consumer options: the engine's
        capabilities lack them (:data:`~stompbroker.broker.engine.capabilities.REDIS`),
        since a node reads as its own consumers' windows allow and chooses among
        them only.  Counted in the statistics again after a consumerless spell.
        """
        self._traffic.queues.add(self.local)
        consumer = self.local.add_consumer(subscriber, window, max_redeliveries)
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
        if not self.consumers:
            self._give_back([*self.pending, *self._delayed()])
            self.pending.clear()

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
            if not self._settled:
                self._engine.loop.call_soon(self._end_settled)
            self._settled.append(entry)

    def _end_settled(self) -> None:
        """One ``XACK`` and one ``XDEL`` for every entry settled since the last."""
        entries = self._settled
        if entries:
            self._settled = []
            writer = self._engine.writer
            writer.command("XACK", self._stream, self._engine.names.group, *entries)
            writer.command("XDEL", self._stream, *entries)

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
            writer.command("XADD", self._stream, "*", "m", encode(engine.ids.node, message))
            if entry is not None:
                self._recent.ended(entry)
                writer.command("XACK", self._stream, engine.names.group, entry)
                writer.command("XDEL", self._stream, entry)

    def _end(self, entries: list[bytes]) -> None:
        """End entries this node will not deliver (copies of what it holds or settled)."""
        recent = self._recent
        for entry in entries:
            recent.ended(entry)
        writer = self._engine.writer
        writer.command("XACK", self._stream, self._engine.names.group, *entries)
        writer.command("XDEL", self._stream, *entries)

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

    def _take(self, entries: list[Any], redelivered: dict[bytes, int] | None = None) -> int:
        """
        Put entries read or claimed from the stream in the local queue, but for
        those this node holds already (left as they are), and for deleted ones,
        second copies of a message held here, and those ended or settled here
        lately (ended again).

        :param redelivered: entry id -> times Redis delivered it, for entries
            taken from a pending list (1 if missing); ``None`` for a read of new ones.
        :returns: how many went into the local queue.
        """
        held = self._entries
        recent = self._recent
        stale: list[bytes] = []
        taken = 0
        for entry_id, fields in entries:
            if not fields:
                # Deleted (XDEL) while pending: its XACK was lost.
                stale.append(entry_id)
                continue
            _, message = decode(fields[b"m"])
            message_id = message.message_id
            holding = held.get(message_id)
            if holding is not None:
                if holding != entry_id:
                    stale.append(entry_id)
                continue
            if recent.knows(entry_id, message_id):
                stale.append(entry_id)
                continue
            if redelivered is not None:
                message.redeliveries += redelivered.get(entry_id, 1)
            held[message_id] = entry_id
            self.local.enqueue(message)
            taken += 1
        if stale:
            self._end(stale)
        return taken

    # -- reconciling with Redis -------------------------------------------------------

    def reconnected(self) -> None:
        """Redis came back: read this node's pending list before reading on."""
        self._reconcile_due = True
        self._wake.set()

    def check_pending(self) -> None:
        """Let the reader compare this node's pending list with what it holds (a slow timer)."""
        self._check_due = True
        self._wake.set()

    async def _pending_count(self) -> int:
        """:returns: how many entries the group's pending list holds for this node."""
        engine = self._engine
        summary = await engine.client.xpending(self._stream, engine.names.group)
        me = engine.ids.node
        for holder in summary.get("consumers") or ():
            name = holder["name"]
            if (name.decode() if isinstance(name, bytes) else name) == me:
                return int(holder["pending"])
        return 0

    async def reconcile(self) -> int:
        """
        Take what this node's pending list holds and the node does not: entries
        a read claimed whose reply never came (the connection died with it).
        They count as redelivered (Redis delivered them once).  Runs in the
        reader, never beside a read.

        :returns: how many entries went into the local queue.
        """
        engine = self._engine
        start: bytes | str = "0"
        taken = 0
        while True:
            reply = await engine.unretried.xreadgroup(
                engine.names.group, engine.ids.node, {self._stream: start}, count=RECONCILE_PAGE
            )
            entries: list[Any] = []
            for _, page in reply or ():
                entries.extend(page)
            if not entries:
                break
            taken += self._take(entries, {})
            start = entries[-1][0]
            if len(entries) < RECONCILE_PAGE:
                break
        if taken:
            log.info(
                "took {count} messages of {queue} from this node's pending list in Redis"
                " (read, but the reply was lost)",
                count=taken,
                queue=self.destination,
            )
        return taken

    async def _reconcile_if_due(self) -> None:
        """Reconcile when due, or when the slow check finds entries the node does not hold."""
        if self._check_due and not self._reconcile_due:
            self._check_due = False
            if await self._pending_count() > len(self._entries) + len(self._settled):
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
        # A client that never sends a read again by itself: a read whose reply
        # is lost must be seen to fail, for what it claimed to be reconciled.
        client = engine.unretried
        names = engine.names
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
                    break
                room = self._room()
                if room <= 0:
                    await self._wake.wait()
                    continue
                try:
                    reply = await client.xreadgroup(
                        names.group,
                        engine.ids.node,
                        {self._stream: ">"},
                        count=room,
                        block=READ_BLOCK_MS,
                    )
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
                    for _, entries in reply or ():
                        self._take(entries)
                    self._give_back(list(self.pending))
                    self.pending.clear()
                    break
                for _, entries in reply or ():
                    self._take(entries)
        except Exception:
            log.failure("reading {queue} from Redis failed", queue=self.destination)
        finally:
            self._reader = None
            if self.consumers and not self._closed:
                self._reader = engine.loop.create_task(self._read())

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
        the pending entries of group consumers whose liveness key has expired.

        :returns: how many entries were claimed.
        """
        engine = self._engine
        client = engine.client
        names = engine.names
        me = engine.ids.node
        claimed = 0
        summary = await client.xpending(self._stream, names.group)
        for holder in summary.get("consumers") or ():
            name = holder["name"]
            name = name.decode() if isinstance(name, bytes) else name
            if name == me or await client.exists(names.alive(name)):
                continue
            room = self._room()
            if room <= 0:
                break
            rows = await client.xpending_range(
                self._stream, names.group, min="-", max="+", count=room, consumername=name
            )
            if not rows:
                await client.xgroup_delconsumer(self._stream, names.group, name)
                continue
            counts = {row["message_id"]: row["times_delivered"] for row in rows}
            entries = await client.xclaim(
                self._stream, names.group, me, min_idle_time=0, message_ids=list(counts)
            )
            self._take(entries, counts)
            claimed += len(entries)
            log.info(
                "took over {count} messages of {queue} from node {node}, which is gone",
                count=len(entries),
                queue=self.destination,
                node=name,
            )
        return claimed
