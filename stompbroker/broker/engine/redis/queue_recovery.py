"""
How a shared queue's handle recovers what Redis, or a lapse, left unsure.

A :class:`~stompbroker.broker.engine.redis.stream_queue.StreamQueue` holds one
:class:`QueueRecovery`, which:

- reconciles the node's own pending lists (:meth:`QueueRecovery.reconcile`):
  after every reconnect, after a read whose reply died with the connection, and
  when the slow check (:meth:`QueueRecovery.check_pending`, every half
  ``--node-timeout``) finds them longer than what the node holds, the node reads
  its own pending lists (``XREADGROUP ... 0``) and takes what it does not hold,
  as redelivered;
- claims what dead nodes held (:meth:`QueueRecovery.claim_from_dead`:
  ``XCLAIM`` once a node's liveness key has expired);
- fences the queue while its node's liveness may have lapsed
  (:meth:`QueueRecovery.fence`, :meth:`QueueRecovery.unfence`; :mod:`.lapse`):
  it keeps afterwards only what its pending lists still hold.

So Redis going away costs no entry, and delivers none twice without
``redelivered:true``: what a lost reply left pending is taken as redelivered,
and an entry Redis hands out again is ended, not delivered, when the node holds
its message or settled it lately (:meth:`.QueueSettling.fresh`).
"""

from __future__ import annotations

from typing import Any, Protocol

from redis.exceptions import ResponseError
from twisted.internet.defer import Deferred

from stompbroker.broker.engine.redis.cluster_dispatch import ClusterDispatch
from stompbroker.broker.engine.redis.connection import run
from stompbroker.broker.engine.redis.keys import record_key
from stompbroker.broker.engine.redis.lapse import (
    CLAIM_DEAD,
    Aside,
    claimed_entries,
    claimed_records,
    sort_after_lapse,
)
from stompbroker.broker.engine.redis.own_pending import owned_entries, pending_count, pending_pages
from stompbroker.broker.engine.redis.queue_reading import QueueReading
from stompbroker.broker.engine.redis.queue_settling import QueueSettling
from stompbroker.broker.engine.redis.redelivery_records import fold
from stompbroker.broker.engine.redis.scripts import run_script
from stompbroker.broker.queueing.queues import WorkerQueue
from stompbroker.logs import logger

__all__ = ["QueueRecovery", "RecoveringQueue"]

log = logger("stompbroker.broker.engine.redis")


class RecoveringQueue(Protocol):
    """What :class:`QueueRecovery` needs of the queue that holds it."""

    destination: str
    local: WorkerQueue

    def take(
        self,
        entries: list[Any],
        redelivered: dict[bytes, int] | None = None,
        stream: str | None = None,
    ) -> int:
        """Put entries in the local queue, but for those it holds or ended; :returns: how many."""

    def screen(self, stream: str, entries: list[Any]) -> list[Any]:
        """:returns: the entries to decide among the nodes."""

    def room(self) -> int:
        """:returns: how many more messages the local consumers can take now."""

    def wake(self) -> None:
        """Let the queue's reader look again."""


class QueueRecovery:
    """
    A queue's reconciling, claiming from dead nodes, and fencing after a lapse.

    :param engine: the :class:`~stompbroker.broker.engine.redis.engine.RedisEngine`.
    :param queue: the queue that holds it.
    :param stream: the queue's stream.
    :param reading: how the queue reads its streams.
    :param cluster: the queue's :class:`~.dispatch.ClusterDispatch`, or ``None``.
    :param settling: the queue's entries and their ending.

    :ivar aside: while the node recovers from a lapse (:meth:`fence`): what the
        queue put aside; ``None`` otherwise.
    """

    __slots__ = (
        "aside",
        "_engine",
        "_queue",
        "_stream",
        "_reading",
        "_cluster",
        "_settling",
        "_reconcile_due",
        "_check_due",
    )

    def __init__(
        self,
        engine: Any,
        queue: RecoveringQueue,
        stream: str,
        reading: QueueReading,
        cluster: ClusterDispatch | None,
        settling: QueueSettling,
    ) -> None:
        self._engine = engine
        self._queue = queue
        self._stream = stream
        self._reading = reading
        self._cluster = cluster
        self._settling = settling
        #: The reader reads the node's own pending lists before it reads on: at
        #: the start, and after each reconnect.
        self._reconcile_due = True
        #: The reader compares the pending lists' length with what the node holds.
        self._check_due = False
        self.aside: Aside | None = None

    # -- a lapse of this node's liveness (:mod:`.lapse`) ---------------------------------

    def check_lapse(self) -> None:
        """
        Before the local queue may hand out what it read ahead: a lapse the node
        has not noticed yet fences it first.  Asks the clock only when something
        waits to be handed out.
        """
        if self.aside is None and self._queue.local.pending:
            self._engine.liveness.lapsing()

    def fence(self) -> None:
        """
        The node may have lapsed: put aside what was read ahead (the local queue
        hands out nothing of it) and, until :meth:`unfence`, what consumers
        acknowledge; the reader waits.
        """
        if self.aside is None:
            pending = self._queue.local.pending
            self.aside = Aside(list(pending))
            pending.clear()

    async def unfence(self) -> None:
        """
        The node is live again: keep what its pending lists still hold; forget
        what another node took over (neither handed out nor ended here: that
        node delivers it ``redelivered:true``), then read and hand out again.
        """
        aside = self.aside
        if aside is None:
            return
        owned = await owned_entries(self._engine, self._reading.own_streams())
        if self.aside is not aside:
            return
        self.aside = None
        settling = self._settling
        result = sort_after_lapse(owned, self._stream, settling.held(), aside)
        for message_id in result.forget:
            settling.forget(message_id)
        settling.end(result.to_end)
        cluster = self._cluster
        if cluster is not None:
            cluster.held = [held for held in cluster.held if (held[0], held[1]) in owned]
            # A node that saw this one dead handed back its own stream: made again.
            cluster.own_made = False
        queue = self._queue
        # Back at the head, as they were (only NACKed ones may have come meanwhile).
        queue.local.pending.extendleft(reversed(result.kept))
        if result.forget:
            log.warn(
                "dropped {count} messages of {queue} that another node took over while"
                " this node's liveness had lapsed ({aside} read ahead, the rest delivered)",
                count=len(result.forget),
                queue=queue.destination,
                aside=result.dropped,
            )
        queue.local.dispatch()
        queue.wake()

    def stored(self) -> Deferred[Any]:
        """
        :returns: what an ACK's RECEIPT waits for once its XACKs are written: a
            ``PING`` after them, or during a lapse, once the node is live again.
        """
        if self.aside is not None:
            return run(self._engine.loop, self._ping_after_lapse())
        waited: Deferred[Any] = self._engine.writer.command_waited("PING")
        return waited

    async def _ping_after_lapse(self) -> Any:
        """An ACK's RECEIPT during a lapse: once the node is live again and its XACKs sent."""
        engine = self._engine
        await engine.liveness.recovered()
        return await engine.writer.command_waited("PING").asFuture(engine.loop)

    async def owned_only(self, reply: Any) -> Any:
        """Of a read whose reply came while the node may have lapsed: what is still its own."""
        owned = await owned_entries(self._engine, [stream for stream, _ in reply])
        return [
            (stream, [entry for entry in entries if (stream, entry[0]) in owned])
            for stream, entries in reply
        ]

    # -- reconciling with Redis -------------------------------------------------------

    def reconnected(self) -> None:
        """Redis came back: read this node's pending lists before reading on."""
        self._reconcile_due = True
        self._queue.wake()

    def read_lost(self) -> None:
        """A read may have reached Redis and its reply died: reconcile before reading on."""
        self._reconcile_due = True

    def check_pending(self) -> None:
        """Let the reader compare this node's pending lists with what it holds (a slow timer)."""
        self._check_due = True
        self._queue.wake()

    def _accounted(self) -> int:
        """:returns: how many entries of its pending lists this node knows of."""
        cluster = self._cluster
        waiting = 0 if cluster is None else len(cluster.held) + len(cluster.switch.left)
        return self._settling.accounted() + waiting

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
        cluster = self._cluster
        for stream in self._reading.own_streams():
            pending: set[bytes] = set()
            async for page in pending_pages(self._engine, stream):
                if cluster is not None and stream == self._stream and cluster.switch.left:
                    # Left for the deciding node when the queue switched (:mod:`.group_switch`).
                    pending.update(entry[0] for entry in page)
                    page = [entry for entry in page if entry[0] not in cluster.switch.left]
                taken += await self._reconciled(stream, page)
            if cluster is not None and stream == self._stream:
                cluster.switch.left &= pending
        if taken:
            log.info(
                "took {count} messages of {queue} from this node's pending list in Redis"
                " (read, but the reply was lost)",
                count=taken,
                queue=self._queue.destination,
            )
        return taken

    async def _reconciled(self, stream: str, entries: list[Any]) -> int:
        """Take a page of this node's pending list of ``stream``; :returns: how many."""
        cluster = self._cluster
        if cluster is None or not cluster.active or stream == cluster.own:
            return self._queue.take(entries, {}, stream)
        async with cluster.lock:
            return await self._claimed(entries, {}, stream)

    async def reconcile_if_due(self) -> None:
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

    # -- claiming from dead nodes ---------------------------------------------------------

    async def _claimed(
        self,
        entries: list[Any],
        counts: dict[Any, int],
        stream: str,
        records: dict[Any, int] | None = None,
    ) -> int:
        """
        Take entries claimed, or found in this node's pending list: while
        deciding, only those this node's consumers should get (the others go
        to their nodes), and none this node holds or settled lately.

        :param counts: entry id -> times Redis delivered it (1 if missing).
        :param records: entry id -> the redelivery count a dead node that held
            it had recorded (:mod:`.redelivery_records`): the count goes on from there.
        :returns: how many went into the local queue.
        """
        records = records or {}
        # The whole count into the payload, which is all that moves with an entry;
        # at least one more than the count a dead node recorded.
        folded = [
            (
                entry_id,
                fold(fields, counts.get(entry_id, 1), records.get(entry_id, -1) + 1)
                if fields
                else fields,
            )
            for entry_id, fields in entries
        ]
        queue = self._queue
        cluster = self._cluster
        if cluster is not None and cluster.active:
            taken = 0
            screened = queue.screen(stream, folded)
            for taken_from, kept in await cluster.decide_locked([(stream, screened)]):
                taken += queue.take(kept, stream=taken_from)
        else:
            taken = queue.take(folded, stream=stream)
        if records:
            # Counted on from a record: recorded here too, in case this node dies.
            recorded = [(entry_id, fields) for entry_id, fields in folded if entry_id in records]
            self._settling.record_claimed(stream, [e for e in recorded if e[1]])
        return taken

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
            room = self._queue.room()
            if room <= 0:
                break
            rows = await client.xpending_range(
                stream, names.group, min="-", max="+", count=room, consumername=name
            )
            if not rows:
                await client.xgroup_delconsumer(stream, names.group, name)
                continue
            counts = {row["message_id"]: row["times_delivered"] for row in rows}
            # Only while its key is still gone: a node back from a lapse keeps its own.
            ids = list(counts)
            keys = [stream, names.alive(name), record_key(name, stream)]
            claimed_reply, records_reply = await run_script(
                client, CLAIM_DEAD, 3, *keys, names.group, me, *ids
            ) or ([], [])
            entries = claimed_entries(claimed_reply)
            await self._claimed(entries, counts, stream, claimed_records(ids, records_reply))
            claimed += len(entries)
            log.info(
                "took over {count} messages of {queue} from node {node}, which is gone",
                count=len(entries),
                queue=self._queue.destination,
                node=name,
            )
        return claimed
