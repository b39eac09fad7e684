"""
A queue shared by every node: a Redis stream with one consumer group.

Every node that has consumers on ``/queue/NAME`` holds a :class:`StreamQueue`
for it, a consumer named after the node in the stream's one group.  The queue
reads (``XREADGROUP ... >``) only as many entries as its local consumers have
room for in their windows, less what it holds already, so a node never takes
more than it can hand out: each message goes to one consumer cluster-wide, and
prefetch windows mean what they mean on one node.  What it reads goes through
the local :class:`~stompbroker.broker.queueing.queues.WorkerQueue` logic it inherits:
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
"""

from __future__ import annotations

import asyncio
from typing import Any

from redis.exceptions import ResponseError
from twisted.internet.defer import Deferred

from stompbroker.broker.engine.redis.codec import decode, encode
from stompbroker.broker.engine.redis.connection import BACKOFF_BASE, BACKOFF_CAP, CONNECTION_ERRORS
from stompbroker.broker.features.selectors import Selector
from stompbroker.broker.queueing.delivery import Consumer
from stompbroker.broker.queueing.queues import WorkerQueue
from stompbroker.logs import logger
from stompbroker.protocol.errors import NotSupported
from stompbroker.protocol.message import Message

__all__ = ["StreamQueue"]

log = logger("stompbroker.broker.engine.redis")

#: Most entries one read takes; an ``auto`` consumer counts for this much room.
MAX_READ = 500
#: Milliseconds a read waits on an empty stream before it looks at its consumers again.
READ_BLOCK_MS = 1000


def _stored(reply: Any) -> bool:
    return True


def _not_stored(failure: Any) -> bool:
    return False


class StreamQueue(WorkerQueue):
    """
    This node's handle on a queue whose messages live in a Redis stream.

    :param destination: the ``/queue/`` destination.
    :param engine: the :class:`~stompbroker.broker.engine.redis.engine.RedisEngine`.
    """

    __slots__ = ("_engine", "_stream", "_entries", "_reader", "_wake", "_closed", "_settled")

    def __init__(self, destination: str, engine: Any) -> None:
        super().__init__(
            destination,
            engine.clock,
            engine.policy,
            engine.counters,
            engine.dead_letters.dead_letter,
            traffic=engine.traffic,
        )
        self._engine = engine
        self._stream = engine.names.queue(destination)
        #: message-id -> its stream entry id, for what this node has read and not settled.
        self._entries: dict[str, bytes] = {}
        self._reader: asyncio.Task[None] | None = None
        self._wake = asyncio.Event()
        self._closed = False
        #: Entries settled this turn of the loop, ended together (:meth:`_end_settled`).
        self._settled: list[bytes] = []

    def __repr__(self) -> str:
        return (
            f"<StreamQueue {self.destination!r}: {len(self.pending)} read here,"
            f" {len(self.consumers)} consumers>"
        )

    # -- what goes into the stream ---------------------------------------------------

    def publish(self, message: Message) -> None:
        """Add a message sent to this queue to its stream, counting it in."""
        self._traffic.published(message)
        self.enqueue(message)

    def enqueue(self, message: Message) -> None:
        """Add a message (a dead letter, a reply) to the stream, for any node's consumers."""
        engine = self._engine
        engine.writer.command("XADD", self._stream, "*", "m", encode(engine.ids.node, message))

    def _was_closed(self) -> bool:
        """
        Whether the queue was closed meanwhile: read through a call so that a check
        made before an ``await`` is not taken (by mypy) to still hold after it.
        """
        return self._closed

    def deliver(self, message: Message) -> None:
        """As :meth:`enqueue` (a topic's fan-out reaching a queue)."""
        self.enqueue(message)

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

        :raises NotSupported: for a selector: a node reads messages as its
            consumers' windows allow, so one that no local selector accepts would
            wait on this node while consumers elsewhere could take it; and for
            consumer options (priority, exclusive, single-active), which would
            need every node's consumers in one place to be kept.
        """
        if options is not None:
            raise NotSupported(
                "consumer priorities and exclusive consumers are not supported by the"
                " redis engine yet",
                "this broker runs on the redis engine, whose queues are shared by nodes"
                " that each choose among their own consumers only (docs/cluster.md); drop"
                " activemq.priority, x-priority, activemq.exclusive and"
                " x-single-active-consumer",
            )
        if selector is not None:
            raise NotSupported(
                "selectors on queues are not supported by the redis engine yet",
                "this broker runs on the redis engine, whose queues take no selector yet"
                " (docs/cluster.md); selectors on topics work",
            )
        consumer = super().add_consumer(subscriber, window, max_redeliveries)
        self._closed = False
        if self._reader is None:
            self._reader = self._engine.loop.create_task(self._read())
        self._wake.set()
        return consumer

    def remove_consumer(self, consumer: Consumer) -> None:
        """
        Stop handing messages to a consumer; what it holds goes to the other local
        consumers, or back to the stream if it was the last.
        """
        super().remove_consumer(consumer)
        if not self.consumers:
            self._give_back(list(self.pending))
            self.pending.clear()

    def dispatch(self) -> None:
        """Hand out what was read, and let the reader read more if there is room."""
        super().dispatch()
        self._wake.set()

    # -- settling ---------------------------------------------------------------------

    def acknowledge(self, consumer: Consumer, messages: list[Message]) -> list[Any]:
        """
        Forget acknowledged messages: end their entries.

        :returns: for persistent ones, a Deferred that fires with whether Redis
            has the acknowledgement (so that the ACK's RECEIPT means it).
        """
        super().acknowledge(consumer, messages)
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

    def dead_letter(self, message: Message, reason: str) -> Any:
        """Move a message to its dead-letter queue's stream, and end its entry here."""
        super().dead_letter(message, reason)
        self._settle(message)
        return None

    def expire(self, message: Message) -> None:
        """Count (or dead-letter) an expired message, and end its entry."""
        super().expire(message)
        self._settle(message)

    def _settle(self, message: Message) -> None:
        """End a message's entry, with the others settled in this turn of the loop."""
        entry = self._entries.pop(message.message_id, None)
        if entry is not None:
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

    def _give_back(self, messages: list[Message]) -> None:
        """Put messages this node read back at the tail of the stream for the other nodes."""
        engine = self._engine
        writer = engine.writer
        for message in messages:
            entry = self._entries.pop(message.message_id, None)
            writer.command("XADD", self._stream, "*", "m", encode(engine.ids.node, message))
            if entry is not None:
                writer.command("XACK", self._stream, engine.names.group, entry)
                writer.command("XDEL", self._stream, entry)

    def close(self) -> None:
        """
        Drop this node's handle: what it has read and holds goes back to the stream
        (the queue itself lives on in Redis), and its reading stops.
        """
        held: list[Message] = []
        for consumer in self.consumers:
            held.extend(consumer.take_all())
        held.extend(self.pending)
        self._give_back(held)
        self.consumers.clear()
        self.pending.clear()
        self._traffic.queues.discard(self)
        self._cancel_sweep()
        self._closed = True
        self._wake.set()

    # -- reading ---------------------------------------------------------------------------

    def _room(self) -> int:
        """:returns: how many more messages the local consumers can take now."""
        room = -len(self.pending)
        for consumer in self.consumers:
            if consumer.paused:
                continue
            room += MAX_READ if consumer.auto else consumer.window - len(consumer.unacked)
        return min(room, MAX_READ)

    def _take(self, entries: list[Any], redelivered: dict[bytes, int] | None = None) -> None:
        """Put entries read or claimed from the stream in the local queue."""
        for entry_id, fields in entries:
            if not fields:
                continue
            _, message = decode(fields[b"m"])
            if redelivered is not None:
                message.redeliveries += redelivered.get(entry_id, 1)
            self._entries[message.message_id] = entry_id
            WorkerQueue.enqueue(self, message)

    async def _read(self) -> None:
        """Read for the local consumers while there are any."""
        engine = self._engine
        client = engine.client
        names = engine.names
        delay = BACKOFF_BASE
        try:
            await self._make_group()
            await self.claim_from_dead()
            while self.consumers and not self._closed:
                self._wake.clear()
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
