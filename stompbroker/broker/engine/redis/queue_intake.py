"""
What a shared queue's handle takes in from Redis, and when: the task that reads
for this node's consumers while there are any, how much room they have, the
hold while another node acts on the whole stream, and the entries a read or a
claim gives put in the local queue.

A :class:`~stompbroker.broker.engine.redis.stream_queue.StreamQueue` holds one
:class:`QueueIntake`.  The handle answers the IQueue methods (consumers,
settling, closing) and tells its intake when to start or stop; the intake reads
(through the handle's :class:`~.queue_reading.QueueReading`) only as many
entries as the local consumers have room for, less what the handle holds
already, so a node never takes more than it can hand out.  It waits on the
handle's wake-up event, which the handle sets on every change of room.
"""

from __future__ import annotations

import asyncio
from typing import Any, Protocol

from redis.exceptions import ResponseError

from stompbroker.broker.engine.redis.cluster_dispatch import ClusterDispatch
from stompbroker.broker.engine.redis.connection import (
    BACKOFF_BASE,
    BACKOFF_CAP,
    CONNECTION_ERRORS,
)
from stompbroker.broker.engine.redis.queue_reading import QueueReading
from stompbroker.broker.engine.redis.queue_recovery import QueueRecovery
from stompbroker.broker.engine.redis.queue_settling import QueueSettling
from stompbroker.broker.queueing.delivery import Consumer
from stompbroker.broker.queueing.queues import WorkerQueue
from stompbroker.logs import logger

__all__ = ["MAX_READ", "IntakeQueue", "QueueIntake"]

log = logger("stompbroker.broker.engine.redis")

#: Seconds a give-back for another node's purge or move waits for the read
#: under way (:meth:`QueueIntake.quiet`): a blocking read's wait and a little
#: more, within the asker's wait for the answer (:data:`~.control.ANSWER_TIMEOUT`).
QUIET_WAIT = 1.5

#: Most entries one read takes; an ``auto`` consumer counts for this much room.
MAX_READ = 500


class IntakeQueue(Protocol):
    """What :class:`QueueIntake` needs of the queue that holds it."""

    destination: str
    local: WorkerQueue

    @property
    def consumers(self) -> list[Consumer]:
        """This node's consumers."""

    @property
    def pending(self) -> Any:
        """What this node has read and not handed out, in order."""


class QueueIntake:
    """
    A shared queue's reading task, its consumers' room, and what a read gives.

    :param engine: the :class:`~stompbroker.broker.engine.redis.engine.RedisEngine`.
    :param queue: the handle that holds it.
    :param stream: the queue's stream.
    :param settling: the handle's entries and their ending.
    :param reading: how the handle reads its streams.
    :param recovery: the handle's reconciling, claiming and fencing.
    :param cluster: the handle's :class:`~.dispatch.ClusterDispatch`, or ``None``.
    :param wake: the handle's wake-up: set when there may be room, or something to do.

    :ivar closed: whether the handle was dropped (its reading ends).
    """

    __slots__ = (
        "closed",
        "_engine",
        "_queue",
        "_stream",
        "_settling",
        "_reading",
        "_recovery",
        "_cluster",
        "_wake",
        "_reader",
        "_held_until",
        "_quiet",
    )

    def __init__(
        self,
        engine: Any,
        queue: IntakeQueue,
        stream: str,
        settling: QueueSettling,
        reading: QueueReading,
        recovery: QueueRecovery,
        cluster: ClusterDispatch | None,
        wake: asyncio.Event,
    ) -> None:
        self._engine = engine
        self._queue = queue
        self._stream = stream
        self._settling = settling
        self._reading = reading
        self._recovery = recovery
        self._cluster = cluster
        self._wake = wake
        self._reader: asyncio.Task[None] | None = None
        self.closed = False
        #: Until when (the clock's seconds) the reader reads nothing: another node
        #: acts on the stream (:meth:`hold`).
        self._held_until = 0.0
        #: Set while no read is under way: none claims entries that its
        #: taking (or, deciding, holding for no consumer) has yet to show.
        self._quiet = asyncio.Event()
        self._quiet.set()

    def start(self) -> None:
        """A consumer came: read (start the reader unless it runs)."""
        self.closed = False
        if self._reader is None:
            self._reader = self._engine.loop.create_task(self._read())
        self._wake.set()

    def close(self) -> None:
        """The handle was dropped: the reader stops at its next look."""
        self.closed = True
        self._wake.set()

    def hold(self, seconds: float) -> None:
        """Read nothing for ``seconds`` or until :meth:`resume`: another node acts on the stream."""
        clock = self._engine.clock
        self._held_until = clock.seconds() + seconds
        clock.callLater(seconds, self._wake.set)

    async def quiet(self, timeout: float) -> None:
        """
        Wait (``timeout`` seconds at most) until the read under way, if any,
        has put what it claimed in the local queue or held it, undecided: a
        give-back for another node's purge or move (:meth:`hold` first, so
        that no new read starts) then gives that back too.
        """
        try:
            await asyncio.wait_for(self._quiet.wait(), timeout)
        except TimeoutError:
            log.warn(
                "gave back what {queue} holds while a read of it was still under way",
                queue=self._queue.destination,
            )

    def resume(self) -> None:
        """The other node is done with the stream: read on."""
        self._held_until = 0.0
        self._wake.set()

    def holding(self) -> bool:
        """Whether the reader reads nothing now: another node acts on the stream (:meth:`hold`)."""
        return bool(self._held_until) and self._held_until > self._engine.clock.seconds()

    def room(self) -> int:
        """:returns: how many more messages the local consumers can take now."""
        if self.holding():
            return 0
        queue = self._queue
        room = -len(queue.pending)
        for consumer in queue.consumers:
            if consumer.paused:
                continue
            room += MAX_READ if consumer.auto else consumer.window - len(consumer.unacked)
        return min(room, MAX_READ)

    def take(
        self,
        entries: list[Any],
        redelivered: dict[bytes, int] | None = None,
        stream: str | None = None,
    ) -> int:
        """
        Put entries read or claimed from a stream (the queue's, a lane, or this
        node's own) in the local queue, but for those
        :meth:`.QueueSettling.fresh` leaves or ends.

        :param redelivered: entry id -> times Redis delivered it, for entries
            taken from a pending list (1 if missing); ``None`` for a read of new ones.
        :returns: how many went into the local queue.
        """
        settling = self._settling
        cluster = self._cluster
        fresh = settling.fresh(entries, stream, cluster)
        held = settling.held()
        # Keyed as QueueSettling.key keys them: by id alone in the queue's stream.
        other = settling.other(stream)
        enqueue = self._queue.local.enqueue
        # A count an entry carries in field r is in its message already (fresh folds it).
        for entry_id, fields, message in fresh:
            if len(fields) > 1 and b"o" in fields and cluster is not None:
                # A group's owner the deciding node chose (dispatch_scripts.MOVE).
                message = cluster.adopt(message, fields)
            if redelivered is not None:
                message.redeliveries += redelivered.get(entry_id, 1)
            held[message.message_id] = entry_id if other is None else (other, entry_id)
            enqueue(message)
        return len(fresh)

    def _was_closed(self) -> bool:
        """
        Whether the handle was closed meanwhile: read through a call so that a check
        made before an ``await`` is not taken (by mypy) to still hold after it.
        """
        return self.closed

    async def _read(self) -> None:
        """Read for the local consumers while there are any."""
        engine = self._engine
        queue = self._queue
        recovery = self._recovery
        delay = BACKOFF_BASE
        try:
            await self._make_group()
            await recovery.claim_from_dead()
            liveness = engine.liveness
            while queue.consumers and not self.closed:
                self._wake.clear()
                if liveness.lapsing():
                    await liveness.recovered()
                    continue
                try:
                    await recovery.reconcile_if_due()
                except CONNECTION_ERRORS:
                    await asyncio.sleep(delay)
                    delay = min(delay * 2, BACKOFF_CAP)
                    continue
                if self._was_closed():
                    self._give_back_read()
                    break
                # A deciding node reads for every node, whatever its own room,
                # but not while another node acts on the stream.
                room = 0 if self.holding() else self._reading.room(self.room())
                if room <= 0:
                    await self._wake.wait()
                    continue
                # Until what the read claims is taken or held, a give-back
                # for another node's purge or move waits (quiet()).
                self._quiet.clear()
                try:
                    try:
                        reply = await self._reading.read(room)
                    except ResponseError as error:
                        if "NOGROUP" not in str(error):
                            raise
                        await self._make_group()
                        if self._cluster is not None:
                            self._cluster.unmade()
                        continue
                    except CONNECTION_ERRORS:
                        # The read may have reached Redis and its reply died: what it
                        # claimed waits in this node's pending list.
                        recovery.read_lost()
                        await asyncio.sleep(delay)
                        delay = min(delay * 2, BACKOFF_CAP)
                        continue
                    delay = BACKOFF_BASE
                    if liveness.lapsing():
                        # Read before the node was stopped, or cut off: another node
                        # may have claimed these meanwhile.
                        await liveness.recovered()
                        reply = await recovery.owned_only(reply)
                    if self._was_closed():
                        # Read after the handle was dropped: back for the others.
                        for stream, entries in reply:
                            self.take(entries, stream=stream)
                        self._give_back_read()
                        break
                    # Each consumer's share of the read leaves in one write, as a
                    # batch of topic messages from Redis does.
                    engine.deliver_together(self._take_read, reply)
                finally:
                    self._quiet.set()
        except Exception:
            log.failure("reading {queue} from Redis failed", queue=queue.destination)
        finally:
            self._reader = None
            if queue.consumers and not self.closed:
                self._reader = engine.loop.create_task(self._read())
            else:
                engine.credit.ended(queue.destination)

    def _take_read(self, reply: Any) -> None:
        """Put what one read gave, ``(stream, entries)`` runs, in the local queue."""
        for stream, entries in reply:
            self.take(entries, stream=stream)

    def _give_back_read(self) -> None:
        """The handle was dropped while reading: what it read and holds goes back for the others."""
        pending = self._queue.pending
        given = list(pending)
        pending.clear()
        cluster = self._cluster
        if cluster is not None and cluster.grouped:
            self._settling.give_back_grouped(cluster, given, [], held=True)
            return
        self._settling.give_back(given)
        if cluster is not None:
            self._settling.give_back_held(cluster)

    async def _make_group(self) -> None:
        """Make the stream and its group, from the start of the stream, unless they exist."""
        try:
            await self._engine.client.xgroup_create(
                self._stream, self._engine.names.group, id="0", mkstream=True
            )
        except ResponseError as error:
            if "BUSYGROUP" not in str(error):
                raise
