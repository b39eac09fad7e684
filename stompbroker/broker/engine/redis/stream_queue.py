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
sees that its liveness key has expired and claims them.

The handle holds one part per job: :class:`~.queue_settling.QueueSettling`
ends entries (and remembers what it ended lately, so that Redis handing an
entry out again costs no second delivery), :class:`~.queue_reading.QueueReading`
reads the stream or its lanes, :class:`~.queue_intake.QueueIntake` runs the
reading task (how much room, when, and what a read gives into the local
queue), :class:`~.queue_leaving.QueueLeaving` gives back what consumers that
leave held, and :class:`~.queue_recovery.QueueRecovery` reconciles the node's
own pending lists after reconnects, claims from dead nodes (``XCLAIM``) and
fences the queue after a liveness lapse.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from itertools import islice
from typing import Any

from zope.interface import implementer

from stompbroker.broker.engine.engine_interface import IQueue
from stompbroker.broker.engine.redis.cluster_dispatch import ClusterDispatch, local_options
from stompbroker.broker.engine.redis.codec import decode, encode_entry
from stompbroker.broker.engine.redis.lanes import LaneMarks
from stompbroker.broker.engine.redis.lapse import Aside
from stompbroker.broker.engine.redis.queue_intake import MAX_READ, QUIET_WAIT, QueueIntake
from stompbroker.broker.engine.redis.queue_leaving import QueueLeaving
from stompbroker.broker.engine.redis.queue_reading import QueueReading
from stompbroker.broker.engine.redis.queue_recovery import QueueRecovery
from stompbroker.broker.engine.redis.queue_settling import QueueSettling
from stompbroker.broker.features.selectors import Selector
from stompbroker.broker.queueing.delivery import Consumer
from stompbroker.broker.queueing.priorities import DEFAULT_PRIORITY
from stompbroker.broker.queueing.queues import WorkerQueue
from stompbroker.broker.store.journal import durable_key
from stompbroker.protocol.frames import Headers
from stompbroker.protocol.message import Message

__all__ = ["StreamQueue"]


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
        "_wake",
        "_settling",
        "_reading",
        "_cluster",
        "_recovery",
        "_intake",
        "_leaving",
    )

    _intake: QueueIntake

    #: No message store: Redis keeps its messages (see the local queue's).
    store_key = None
    #: Its messages wait in Redis until room is made: a wildcard consumer's
    #: offer of room must wake its reader even when it holds nothing here.
    reads_ahead = True

    def __init__(
        self, destination: str, engine: Any, durable: tuple[str, str] | None = None
    ) -> None:
        self.destination = destination
        self.durable = durable
        self.key = None if durable is None else durable_key(durable)
        self._engine = engine
        self._traffic = engine.traffic
        names = engine.names
        self._stream: str = (
            names.queue(destination) if self.key is None else names.durable(self.key)
        )
        #: The entries this node has read and not settled, and their ending.
        self._settling = QueueSettling(engine, self._stream, self)
        self.local = WorkerQueue(
            destination,
            engine.clock,
            engine.policy,
            engine.counters,
            engine.dead_letters.dead_letter,
            traffic=engine.traffic,
            owner=self,
            left=self._settling.settle,
        )
        #: Set on every change of room: the intake's reader looks again.
        self._wake = asyncio.Event()
        #: Who gets what across the nodes, for a ``/queue/`` (:mod:`.dispatch`).
        self._cluster: ClusterDispatch | None = None
        if durable is None:
            self._cluster = ClusterDispatch(
                engine,
                destination,
                self._stream,
                lambda: self._intake.room(),
                self.local,
            )
        #: How this node reads the queue: its stream, or its priority lanes.
        self._reading = QueueReading(
            engine,
            destination if durable is None else None,
            self._stream,
            self._cluster,
            screen=self.screen,
        )
        #: Reconciling, claiming from dead nodes, fencing after a lapse.
        self._recovery = QueueRecovery(
            engine, self, self._stream, self._reading, self._cluster, self._settling
        )
        #: The reading task, the consumers' room, and what a read gives (:mod:`.queue_intake`).
        self._intake = QueueIntake(
            engine,
            self,
            self._stream,
            self._settling,
            self._reading,
            self._recovery,
            self._cluster,
            self._wake,
        )
        #: What goes back to the stream when consumers leave (:mod:`.queue_leaving`).
        self._leaving = QueueLeaving(self, self._settling, self._cluster)

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

    def depth(self) -> int:
        """:returns: what this node has read and not handed out (it pages nothing)."""
        return len(self.local.pending)

    @property
    def consumers(self) -> list[Consumer]:
        """This node's consumers."""
        return self.local.consumers

    @property
    def undecided(self) -> list[Message]:
        """What this node read, deciding (:mod:`.dispatch`), that no consumer accepts: it waits."""
        cluster = self._cluster
        return [] if cluster is None else [decode(payload)[1] for _, _, payload in cluster.held]

    @property
    def aside(self) -> Aside | None:
        """While the node recovers from a lapse: what this queue put aside; else ``None``."""
        return self._recovery.aside

    def wake(self) -> None:
        """Let the reader look again: there may be room, or something to reconcile."""
        self._wake.set()

    # -- what an operator may see and take (of what this node has read) -------------

    def is_idle(self) -> bool:
        """:returns: whether this node holds nothing of it and consumes nothing."""
        return self.local.is_idle()

    def browse(self, count: int) -> list[Message]:
        """:returns: the first ``count`` messages this node has read and not handed out."""
        return list(islice(self.local.pending, count))

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
        """
        Add a message (a dead letter, a reply) to the stream, for any node's
        consumers: under the queue's limits as one node's queue takes it
        (:meth:`.SharedLimit.enqueue`), counted in its byte count.
        """
        engine = self._engine
        payload = encode_entry(engine.ids.node, message)
        limit = None if self.key is not None else engine.limits.of(self.destination)
        if limit is not None:
            limit.enqueue(engine, message, self.lane(message), payload)
            return
        engine.writer.command("XADD", self.lane(message), "*", "m", payload)

    def lane(self, message: Message) -> str:
        """:returns: the stream a message goes to: the queue's, or its priority's lane."""
        if message.priority == DEFAULT_PRIORITY or self.key is not None:
            return self._stream
        engine = self._engine
        lanes: LaneMarks = engine.lanes
        return lanes.stream(engine.writer, self.destination, self._stream, message.priority)

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
        held: dict[str, Message] | None = None,
    ) -> Consumer:
        """
        Start handing messages to a local subscriber; the first starts the reading.
        ``held`` is a wildcard consumer's shared dict of what it holds
        (:mod:`~stompbroker.broker.queueing.wildcard`), whose one window then
        bounds what this handle reads for it.

        A ``/queue/``'s consumer is registered in Redis with its selector and
        options, so that every node's reads give it what it should get
        (:mod:`~stompbroker.broker.engine.redis.cluster_dispatch`); among this node's
        consumers, the local queue chooses by the one-node rules.  Counted in the
        statistics again after a consumerless spell.
        """
        self._traffic.queues.add(self.local)
        self._recovery.check_lapse()
        consumer = self.local.add_consumer(
            subscriber,
            window,
            max_redeliveries,
            selector=selector,
            options=options if self._cluster is None else local_options(options),
            held=held,
        )
        if self._cluster is not None:
            self._cluster.register(
                consumer, selector, options, MAX_READ if consumer.auto else window
            )
        self._intake.start()
        return consumer

    def remove_consumer(self, consumer: Consumer) -> None:
        """
        Stop handing messages to a consumer; what it holds goes to the other local
        consumers, or back to the stream if it was the last (with the NACKed
        messages that wait here for their redelivery, which then go at once).
        """
        returned = list(consumer.unacked.values())
        self.local.remove_consumer(consumer)
        self._wake.set()
        self._leaving.consumer_left(consumer, returned)

    def dispatch(self) -> None:
        """Hand out what was read, and let the reader read more if there is room."""
        self._recovery.check_lapse()
        self.local.dispatch()
        self._wake.set()

    # -- settling ---------------------------------------------------------------------

    def acknowledge(self, consumer: Consumer, messages: list[Message]) -> list[Any]:
        """
        Forget acknowledged messages: end their entries.

        :returns: for persistent ones, a Deferred that fires with whether Redis
            has the acknowledgement (so that the ACK's RECEIPT means it).
        """
        self._recovery.check_lapse()
        self.local.acknowledge(consumer, messages)
        self._wake.set()
        settling = self._settling
        if settling.settle_all(messages):
            # The RECEIPT waits for the XACK: end the entries before the PING.
            settling.end_settled()
            return [self._recovery.stored().addCallbacks(_stored, _not_stored)]
        return []

    def requeue(self, consumer: Consumer, messages: list[Message]) -> list[Any]:
        """Return messages to the local queue's head (see the local queue's)."""
        self._recovery.check_lapse()
        written = self.local.requeue(consumer, messages)
        self._settling.record(messages)
        self._wake.set()
        return written

    def reject(self, messages: list[Message]) -> list[Any]:
        """Dead-letter messages a consumer refused for good (see the local queue's)."""
        self._recovery.check_lapse()
        written = self.local.reject(messages)
        self._wake.set()
        return written

    def close(self) -> None:
        """
        Drop this node's handle: what it has read and holds goes back to the stream
        (the queue itself lives on in Redis), and its reading stops.
        """
        self._leaving.give_back_all()
        self.consumers.clear()
        self.pending.clear()
        self._traffic.queues.discard(self.local)
        self.local.expiry.cancel()
        self._intake.close()

    # -- reading ---------------------------------------------------------------------------

    def give_back_for(self, seconds: float) -> list[Message]:
        """
        Another node acts on the whole stream (a purge, a move: :mod:`.queue_actions`):
        put what this node read ahead and did not hand out (and, deciding,
        what no consumer accepts) back at the tail of its lane, and read
        nothing more for ``seconds`` or until :meth:`resume`.

        :returns: the messages given back.
        """
        given = list(self.pending)
        self.pending.clear()
        self._settling.give_back(given)
        if self._cluster is not None and self._cluster.held:
            given += self.undecided
            self._settling.give_back_held(self._cluster)
        self._intake.hold(seconds)
        return given

    async def give_back_quietly(self, seconds: float) -> list[Message]:
        """
        As :meth:`give_back_for`, once the read under way (if any) has taken or
        held what it claimed (:meth:`.QueueIntake.quiet`, at most
        :data:`~.queue_intake.QUIET_WAIT`): else what it claims after the
        give-back, read ahead or (deciding) held for no consumer, would stay
        with this node, unseen by the purge or move.
        """
        self._intake.hold(seconds)
        await self._intake.quiet(QUIET_WAIT)
        return self.give_back_for(seconds)

    def resume(self) -> None:
        """The other node is done with the stream: read on."""
        self._intake.resume()

    def room(self) -> int:
        """:returns: how many more messages the local consumers can take now."""
        return self._intake.room()

    def screen(self, stream: str, entries: list[Any]) -> list[Any]:
        """
        :returns: the entries to decide among the nodes: those
            :meth:`.QueueSettling.fresh` keeps, as read.
        """
        fresh = self._settling.fresh(entries, stream, self._cluster)
        return [(entry_id, fields) for entry_id, fields, _ in fresh]

    def take(
        self,
        entries: list[Any],
        redelivered: dict[bytes, int] | None = None,
        stream: str | None = None,
    ) -> int:
        """
        Put entries read or claimed from a stream in the local queue, but for those
        :meth:`.QueueSettling.fresh` leaves or ends (:meth:`.QueueIntake.take`).

        :returns: how many went into the local queue.
        """
        return self._intake.take(entries, redelivered, stream)

    # -- a lapse, reconciling, claiming (:mod:`.queue_recovery`) -------------------------

    def fence(self) -> None:
        """The node may have lapsed: put aside what was read ahead (see :class:`.QueueRecovery`)."""
        self._recovery.fence()

    async def unfence(self) -> None:
        """The node is live again: keep what its pending lists still hold, then read on."""
        await self._recovery.unfence()

    def reconnected(self) -> None:
        """Redis came back: read this node's pending lists before reading on."""
        self._recovery.reconnected()

    def check_pending(self) -> None:
        """Let the reader compare this node's pending lists with what it holds (a slow timer)."""
        self._recovery.check_pending()

    async def reconcile(self) -> int:
        """Take what this node's pending lists hold and the node does not; :returns: how many."""
        return await self._recovery.reconcile()

    async def claim_from_dead(self) -> int:
        """Take over what dead nodes held of this queue; :returns: how many entries."""
        return await self._recovery.claim_from_dead()
