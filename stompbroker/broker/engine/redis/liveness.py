"""
A node's liveness in Redis, and what happens when another node's ends.

Each node keeps a key alive (``SET ... PX --node-timeout``, every third of it)
and looks, every half ``--node-timeout``, for queue entries held by nodes whose
key has expired, and takes them over for its own consumers
(:meth:`~stompbroker.broker.engine.redis.stream_queue.StreamQueue.claim_from_dead`),
and has each queue compare the length of its own pending list with what it
holds (:meth:`~stompbroker.broker.engine.redis.stream_queue.StreamQueue.check_pending`);
the same look trims the streams it knows for age, reads the registry of
durable subscriptions again, and removes dead nodes' subscribers from presence
(:mod:`~stompbroker.broker.engine.redis.cluster_presence`).  ``GET /api/nodes`` lists the live keys.

A node that was stopped or cut off past ``--node-timeout`` finds out
(:class:`~stompbroker.broker.engine.redis.lapse.LapseWatch`: per beat, per
read, per turn of settling) and, before it hands out anything more of a shared
queue, *lapses* (:meth:`Liveness.lapse`): every queue stops reading, puts aside
what it read ahead and what its consumers acknowledged meanwhile, the node
sets its key again, and each queue keeps only the entries its pending lists
still name (the others were claimed by another node, which delivers them
``redelivered:true``); what it acknowledged of those is not ended here.
"""

from __future__ import annotations

import asyncio
from typing import Any

from twisted.internet.defer import Deferred

from stompbroker.broker.engine.engine_interface import Node
from stompbroker.broker.engine.redis.connection import (
    BACKOFF_BASE,
    BACKOFF_CAP,
    CONNECTION_ERRORS,
    RedisUnreachable,
    run,
)
from stompbroker.broker.engine.redis.lapse import LapseWatch
from stompbroker.broker.engine.redis.scripts import load
from stompbroker.broker.engine.redis.stream_queue import StreamQueue
from stompbroker.logs import logger

__all__ = ["BEAT", "Liveness"]

#: lua/beat.lua (what it takes and answers is said there).
BEAT = load("beat")

log = logger("stompbroker.broker.engine.redis")


class Liveness:
    """
    This node's liveness key, the list of live nodes, and the look for dead ones.

    :param engine: the :class:`~stompbroker.broker.engine.redis.engine.RedisEngine`.
    """

    def __init__(self, engine: Any) -> None:
        self._engine = engine
        #: Until when this node's key is certainly alive.
        self.watch = LapseWatch(engine.clock, engine.node_timeout)
        #: While the node recovers from a lapse: done once it has.
        self._fence: asyncio.Future[None] | None = None
        #: The value of this node's liveness key, new at each :meth:`announce`: while
        #: the key holds it, it has not expired since (beats never make it again),
        #: so no other node has claimed anything from this one meanwhile.
        self.epoch = "0"

    def _key(self) -> str:
        engine = self._engine
        key: str = engine.names.alive(engine.ids.node)
        return key

    @property
    def key(self) -> str:
        """This node's liveness key."""
        return self._key()

    async def announce(self) -> None:
        """
        Set this node's liveness key to a new epoch, waiting for Redis (at start,
        and after a lapse): from then on no other node claims its entries, and
        what it ends under this epoch needs no check of whom each entry is
        pending to while the key holds it (:data:`~.queue_settling.SETTLE`).
        """
        engine = self._engine
        self.epoch = str(int(self.epoch) + 1)
        sent = self.watch.sending()
        await engine.client.set(self._key(), self.epoch, px=int(engine.node_timeout * 1000))
        self.watch.confirmed(sent)

    def beat(self) -> None:
        """
        Keep this node's liveness key alive (:data:`BEAT`): a beat that comes
        more than ``--node-timeout`` after the last one Redis confirmed, or that
        finds the key gone, starts a lapse.  A beat renews only the key that holds
        its epoch, so it never makes the key again, nor brings back an older epoch
        when it reaches Redis late: only :meth:`announce` sets the key, with a new
        epoch, once the node has sorted out what other nodes took meanwhile.
        """
        engine = self._engine
        if self.watch.lapsed():
            self.lapse()
            return
        sent = self.watch.sending()
        ms = int(engine.node_timeout * 1000)
        epoch = self.epoch
        beat = engine.writer.command_waited("EVALSHA", BEAT, 1, self._key(), epoch, ms)
        beat.addCallbacks(self._beaten, self._beat_failed, callbackArgs=(sent, epoch))

    def _beaten(self, previous: Any, sent: float, epoch: str) -> None:
        if epoch != self.epoch:
            return  # sent before the node announced itself again: it renewed nothing
        if previous is None or previous != epoch.encode():
            if self._fence is None:
                # The key had expired: another node may have taken what this one holds.
                self.watch.gone()
                self.lapse()
            return
        self.watch.confirmed(sent)

    def _beat_failed(self, failure: Any) -> None:
        """Redis away: the beat stays queued; the watch sees the lapse if it lasts."""
        failure.trap(RedisUnreachable)

    def foreign_settled(self, count: int, destination: str) -> None:
        """
        ``count`` entries this node asked to end were held by another node (which
        claimed them while this one's liveness had lapsed, and redelivered them):
        their acknowledgements are dropped, and counted in the node's
        ``foreign_acks`` (``/stats``, ``/metrics``).
        """
        counters = self._engine.counters
        counters.foreign_acks += count
        log.warn(
            "{count} acknowledgements of {queue} ended nothing: another node took over"
            " those messages while this node's liveness had lapsed, and redelivers them"
            " ({total} so far)",
            count=count,
            queue=destination,
            total=counters.foreign_acks,
        )

    # -- a lapse -------------------------------------------------------------------------

    @property
    def fenced(self) -> bool:
        """Whether the node is recovering from a lapse (its queues hand out nothing)."""
        return self._fence is not None

    def lapsing(self) -> bool:
        """
        :returns: whether the node's queues must hand out and settle nothing now:
            it is recovering from a lapse, or finds one now (and starts recovering).
        """
        if self._fence is not None:
            return True
        if self.watch.lapsed():
            self.lapse()
            return True
        return False

    def lapse(self) -> None:
        """
        This node's key may have expired: fence every shared queue at once (they
        read, hand out and settle nothing), then set the key again and let each
        queue keep only what its pending lists still hold.
        """
        if self._fence is not None:
            return
        engine = self._engine
        self._fence = engine.loop.create_future()
        log.warn(
            "node {node} lost its liveness in Redis (stopped or cut off for longer than"
            " --node-timeout {timeout} s): dropping what other nodes took over meanwhile",
            node=engine.ids.node,
            timeout=engine.node_timeout,
        )
        for queue in self._stream_queues():
            queue.fence()
        engine.loop.create_task(self._recover())

    async def recovered(self) -> None:
        """Wait until the node has recovered from a lapse (at once when it is not in one)."""
        fence = self._fence
        if fence is not None:
            await asyncio.shield(fence)

    async def _recover(self) -> None:
        """Set the key again (claims of this node's entries stop), then sort each queue."""
        engine = self._engine
        delay = BACKOFF_BASE
        try:
            while True:
                try:
                    await self.announce()
                    for queue in self._stream_queues():
                        await queue.unfence()
                    break
                except CONNECTION_ERRORS:
                    pass
                except Exception:
                    log.failure("recovering node {node} from a lapse failed", node=engine.ids.node)
                await asyncio.sleep(delay)
                delay = min(delay * 2, BACKOFF_CAP)
        finally:
            fence, self._fence = self._fence, None
            if fence is not None and not fence.done():
                fence.set_result(None)
        log.info("node {node} is live again in Redis", node=engine.ids.node)

    def _stream_queues(self) -> list[StreamQueue]:
        engine = self._engine
        queues = [*engine.queues.values(), *engine.durables.queues.values()]
        return [queue for queue in queues if isinstance(queue, StreamQueue)]

    # A remote engine answers later: IEngine.nodes allows a Deferred.
    def nodes(self) -> Deferred[list[Node]]:
        """
        :returns: a Deferred firing with every node whose liveness key is in the
            server now (this one first), for ``GET /api/nodes``; a node killed
            drops out within ``--node-timeout``.
        """
        return run(self._engine.loop, self._live_nodes())

    async def _live_nodes(self) -> list[Node]:
        engine = self._engine
        prefix = engine.names.alive("")
        names = [
            (key.decode() if isinstance(key, bytes) else key)[len(prefix) :]
            async for key in engine.client.scan_iter(match=engine.names.nodes(), count=100)
        ]
        here = engine.ids.node
        ordered = sorted(names, key=lambda name: (name != here, name))
        return [Node(name, name == here, "redis") for name in ordered]

    def scan(self) -> None:
        """
        Look for what dead nodes held in the queues this node consumes from, and
        trim the streams it knows for age, and read the registry of durable
        subscriptions again.
        """
        engine = self._engine
        if self.lapsing():
            return
        engine.redis_streams.trim()
        engine.durables.load().addErrback(self._failed, "the durable subscriptions")
        if engine.presence is not None:
            engine.presence.sweep()
        for queue in [*engine.queues.values(), *engine.durables.queues.values()]:
            if isinstance(queue, StreamQueue) and queue.consumers:
                queue.check_pending()
                claimed = run(engine.loop, queue.claim_from_dead())
                claimed.addErrback(self._failed, queue.destination)

    def _failed(self, failure: Any, destination: str) -> None:
        if failure.check(RedisUnreachable, *CONNECTION_ERRORS):
            return
        log.failure("claiming {queue} from dead nodes failed", failure, queue=destination)
