"""
A node's time in the cluster, from joining to leaving: the part of the
:class:`~stompbroker.broker.engine.redis.engine.RedisEngine` that starts it
(subscribes to the topics and the features' channels, announces the node,
loads what every node mirrors, starts the periodic loops), stops it (the last
writes, then leaving), and notices its connections coming back.

It is its own object so that the engine holds the order of joining and leaving
in one place, apart from the routing of messages: each feature (liveness,
durable subscriptions, retained messages, presence, policies, figures) keeps
its own job, and this part only calls them in turn.  Why the pub/sub
connection's return is a loud event: topic messages other nodes published
meanwhile never reach this node (docs/cluster.md, "Cross-node topic messages
and a slow node").
"""

from __future__ import annotations

import asyncio
from typing import Any

from twisted.internet.task import LoopingCall

from stompbroker.broker.engine.node_figures import TopicGaps
from stompbroker.broker.engine.redis.connection import (
    CONNECTION_ERRORS,
    check_server,
    close_client,
    make_client,
)
from stompbroker.broker.engine.redis.failover import FailoverWatch, follow_failovers
from stompbroker.broker.engine.redis.figures_exchange import FIGURES_INTERVAL
from stompbroker.broker.engine.redis.listener import Unreadable, listen, pushed
from stompbroker.broker.engine.redis.shared_expiry import INTERVAL as EXPIRY_INTERVAL
from stompbroker.broker.engine.redis.stream_queue import StreamQueue
from stompbroker.logs import logger

__all__ = ["PUBSUB_BACKOFF_CAP", "STOP_TIMEOUT", "EngineLifecycle"]

log = logger("stompbroker.broker.engine.redis")

#: Seconds; the longest wait between two attempts to bring the pub/sub connection back.
PUBSUB_BACKOFF_CAP = 0.25
#: The longest a stopping node waits for its last writes.
STOP_TIMEOUT = 5.0


class EngineLifecycle:
    """
    Joining the cluster, leaving it, and the pub/sub connection's returns.

    :param engine: the :class:`~stompbroker.broker.engine.redis.engine.RedisEngine`
        that holds it; its clients and writer are made by its ``open``.

    :ivar pubsub_reconnects: how often Redis closed the pub/sub connection and
        it came back.
    :ivar gap_subscriptions: topic subscriptions told of those gaps
        (``cluster-gap:true``).
    """

    def __init__(self, engine: Any) -> None:
        self._engine = engine
        self._subscriber: Any = None
        self._listener: asyncio.Task[None] | None = None
        #: Follows a Sentinel failover (``redis+sentinel://`` only; :meth:`start`).
        self.failover: FailoverWatch | None = None
        self._loops: list[LoopingCall] = []
        self.pubsub_reconnects = 0
        self.gap_subscriptions = 0
        #: The topic batches from other nodes this node could not read (:mod:`.topic_batches`).
        self.unreadable = Unreadable()

    def open(self) -> None:
        """Make the pub/sub client (it connects in :meth:`start`)."""
        # Topic messages published while it is away are lost for this node:
        # try again every quarter second at most, not every 2 s.
        self._subscriber = make_client(
            self._engine.url, forever=True, backoff_cap=PUBSUB_BACKOFF_CAP
        )

    def reconnected(self) -> None:
        """Redis answers again: every queue read here reconciles its pending list."""
        engine = self._engine
        for queue in [*engine.queues.values(), *engine.durables.queues.values()]:
            if isinstance(queue, StreamQueue):
                queue.reconnected()

    async def start(self) -> None:
        """
        Connect and check the server, subscribe to the topics, announce this
        node, load what every node mirrors, and start the periodic loops.
        """
        engine = self._engine
        names = engine.names
        version = await check_server(engine.client, engine.url)
        # With Sentinel: drop every connection to the old primary as soon as the
        # Sentinels announce a new one (docs/cluster.md, "Replica and Sentinel").
        writer = engine.writer
        self.failover = follow_failovers(
            engine.url,
            engine.loop,
            [engine.client, engine.unretried, self._subscriber, writer.client],
            writer.primary_moved,
            writer.pause,
        )
        if self.failover is not None:
            self.failover.start(getattr(engine.client.connection_pool, "master_address", None))
        pubsub = self._subscriber.pubsub(push_handler_func=pushed)
        await pubsub.psubscribe(names.topics, names.streams)
        channels = [names.inbox(engine.ids.node), names.control]
        channels.extend(channel.decode() for channel in engine.channels)
        if engine.resumes is not None:
            channels.append(engine.resumes.channel)
        await pubsub.subscribe(*channels)
        # redis-py connects this connection again by itself when Redis closes
        # it, and subscribes again, without a word: say it, since what other
        # nodes published meanwhile never reaches this node.
        pubsub.connection.register_connect_callback(self.subscribed_again)
        self._listener = engine.loop.create_task(listen(engine, pubsub, self.unreadable))
        await engine.liveness.announce()
        await engine.durables.load().asFuture(engine.loop)
        await engine.retained.load().asFuture(engine.loop)
        if engine.presence is not None:
            await engine.presence.load().asFuture(engine.loop)
        # The configuration's policies are in by now: share what operators change from here on.
        engine.policies.share(engine.shared_policies)
        await engine.shared_policies.load().asFuture(engine.loop)
        beat = self._every(engine.liveness.beat, engine.node_timeout / 3, now=False)
        scan = self._every(engine.liveness.scan, engine.node_timeout / 2, now=False)
        figures = self._every(engine.figures.tick, FIGURES_INTERVAL, now=True)
        expiry = self._every(engine.expiry.tick, EXPIRY_INTERVAL, now=False)
        self._loops = [beat, scan, figures, expiry]
        if engine.resumes is not None:
            self._loops.append(self._every(engine.resumes.tick, FIGURES_INTERVAL, now=True))
        log.info(
            "redis engine: node {node} on {url} (Redis {version}), node timeout {timeout} s",
            node=engine.ids.node,
            url=engine.url.masked,
            version=version,
            timeout=engine.node_timeout,
        )

    def _every(self, call: Any, seconds: float, *, now: bool) -> LoopingCall:
        """:returns: a started loop that calls ``call`` every ``seconds`` on the engine's clock."""
        loop = LoopingCall(call)
        loop.clock = self._engine.clock
        loop.start(seconds, now=now)
        return loop

    def subscribed_again(self, connection: Any) -> None:
        """
        The pub/sub connection is back after Redis closed it: Redis went away,
        or closed it because this node read too slowly (``client-output-buffer-limit
        pubsub``, docs/cluster.md); redis-py has subscribed again.
        """
        engine = self._engine
        self.pubsub_reconnects += 1
        # Every topic subscription here may have missed messages: its next
        # MESSAGE says so (durable subscriptions read streams: nothing lost).
        told = engine.fanout.mark_gap()
        self.gap_subscriptions += told
        # Notices of retained messages and new queues may have been missed:
        # read them all again.
        engine.retained.load()
        if engine.presence is not None:
            engine.presence.load()
        engine.queue_names.reload()
        log.warn(
            "Redis closed this node's pub/sub connection and it is subscribed again"
            " (closings so far: {count}): topic messages other nodes published meanwhile"
            " did not reach this node's subscribers ({told} told so by cluster-gap:true"
            " on their next message); if Redis's log says 'output buffer"
            " limits', this node reads them slower than they are published"
            " (docs/cluster.md, 'Cross-node topic messages and a slow node')",
            count=self.pubsub_reconnects,
            told=told,
        )

    def topic_gaps(self) -> TopicGaps:
        """:returns: how often this node missed other nodes' topic messages, and whom it told."""
        return TopicGaps(self.pubsub_reconnects, self.gap_subscriptions, self.unreadable.count)

    async def stop(self) -> None:
        """Stop the loops and the queues' reading, send the last writes, leave, and disconnect."""
        engine = self._engine
        if not self._loops:
            # It never started (the server was not there, or refused us).
            await close_client(self._subscriber)
            await close_client(engine.client)
            await close_client(engine.unretried)
            await engine.writer.close()
            return
        for call in self._loops:
            if call.running:
                call.stop()
        for queue in list(engine.queues.values()):
            if isinstance(queue, StreamQueue):
                queue.close()
        engine.durables.close()
        if engine.resumes is not None:
            engine.resumes.close()
        try:
            await asyncio.wait_for(engine.writer.drained(), STOP_TIMEOUT)
            await engine.client.delete(engine.names.alive(engine.ids.node))
            await engine.figures.leave()
        except (TimeoutError, *CONNECTION_ERRORS) as error:
            log.warn("left Redis without its last writes: {error}", error=str(error))
        if self._listener is not None:
            self._listener.cancel()
        if self.failover is not None:
            await self.failover.close()
        await close_client(self._subscriber)
        await close_client(engine.client)
        await close_client(engine.unretried)
        await engine.writer.close()
