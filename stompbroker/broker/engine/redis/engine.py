"""
:class:`RedisEngine`: the state of destinations in a Redis server shared by
every node (broker process) started with the same ``--engine`` URL.

It is the local engine (:class:`~stompbroker.broker.engine.local.LocalEngine`)
for everything that belongs to this node's connections (the topic tree of its
subscribers, topic subscriptions' own queues, temporary queues) plus Redis for
what the nodes share:

- **topics**: a SEND is fanned out to this node's subscribers at once, exactly
  as on one node, and ``PUBLISH``\\ ed on the destination's channel.  Every node
  holds one pattern subscription to all topic channels, and fans what another
  node published out to its own subscribers through the same local path; a node
  without a subscriber for a destination drops it after one cached tree lookup.
  One subscription per node means each message arrives once per node, in the
  order each publisher sent (docs/cluster.md says why this beats one
  subscription per pattern).
- **queues**: a Redis stream each, shared through one consumer group
  (:mod:`stompbroker.broker.engine.redis.queues`).
- **streams**: a Redis stream each, appended by a script that also publishes
  the entry to every node (:mod:`stompbroker.broker.engine.redis.streams`);
- **reply queues**: a reply to another node's temporary queue goes to that
  node's own channel, whose name the reply queue's name holds.
- **durable topic subscriptions**: a stream each, and a registry every node
  mirrors; the node a topic message is sent to writes it to the stream of each
  matching durable subscription (:mod:`stompbroker.broker.engine.redis.durables`).
- **resumable sessions**: each node files a small record of its own in a
  hash, and hands a session over to the node its client resumes on
  (:mod:`stompbroker.broker.engine.redis.resumes`).
- **liveness**: each node keeps a key alive (``SET ... PX --node-timeout``) and
  looks, every half ``--node-timeout``, for queue entries held by nodes whose
  key has expired, and takes them over.

Statistics: a topic message counts in on the node it was sent to, and as
delivered on each node that delivers it, so that the nodes' counts add up; each
node shares its figures and reads the others' and what waits unread in Redis
(:mod:`stompbroker.broker.engine.redis.figures`), for statistics of the whole
cluster.
"""

from __future__ import annotations

import asyncio
from typing import Any

from twisted.internet.defer import Deferred
from twisted.internet.task import LoopingCall

from stompbroker.broker.engine.base import Node
from stompbroker.broker.engine.figures import ClusterView
from stompbroker.broker.engine.local import DEFAULT_POLICY, LocalEngine
from stompbroker.broker.engine.redis.codec import (
    Names,
    encode,
    pack_batch,
)
from stompbroker.broker.engine.redis.connection import (
    CONNECTION_ERRORS,
    RedisUnreachable,
    Writer,
    check_reactor,
    check_server,
    make_client,
    run,
)
from stompbroker.broker.engine.redis.durables import Durables, DurableStreamQueue
from stompbroker.broker.engine.redis.figures import FIGURES_INTERVAL, FiguresExchange
from stompbroker.broker.engine.redis.listener import listen
from stompbroker.broker.engine.redis.queues import StreamQueue
from stompbroker.broker.engine.redis.resumes import RedisResumeDirectory
from stompbroker.broker.engine.redis.streams import RedisStreamBackend, RedisStreams
from stompbroker.broker.engine.redis.url import EngineURL
from stompbroker.broker.flow.traffic import Traffic
from stompbroker.broker.queueing.delivery import DeliveryCounters, DeliveryPolicy
from stompbroker.broker.routing.destinations import QUEUE_PREFIX, REPLY_QUEUE_PREFIX
from stompbroker.broker.routing.ids import Ids
from stompbroker.broker.streams.offsets import StreamLimits, StreamStart
from stompbroker.broker.streams.reader import StreamReader
from stompbroker.broker.streams.registry import Streams
from stompbroker.logs import logger
from stompbroker.protocol.message import Message

__all__ = ["DEFAULT_NODE_TIMEOUT", "RedisEngine"]

log = logger("stompbroker.broker.engine.redis")

#: Seconds after which a silent node counts as dead, and its messages go elsewhere.
DEFAULT_NODE_TIMEOUT = 10.0
#: The longest a stopping node waits for its last writes.
STOP_TIMEOUT = 5.0


def _nothing(result: Any) -> None:
    return None


class RedisEngine(LocalEngine):
    """
    Destinations shared with every node on the same Redis server and prefix.

    :param clock: Twisted's asyncio reactor (any other is refused by :meth:`open`).
    :param url: where Redis is (:func:`~stompbroker.broker.engine.redis.url.parse_engine`).
    :param policy: as the local engine's.
    :param node_timeout: seconds after which a node that stopped answering is
        dead, and what its consumers held goes to other nodes' consumers.
    :param ids: the broker's ids; their node token names this node in Redis.

    :ivar names: the Redis key and channel names.
    :ivar writer: the :class:`~stompbroker.broker.engine.redis.connection.Writer`
        every write goes through (set by :meth:`open`).
    """

    def __init__(
        self,
        clock: Any,
        url: EngineURL,
        *,
        policy: DeliveryPolicy = DEFAULT_POLICY,
        node_timeout: float = DEFAULT_NODE_TIMEOUT,
        ids: Ids | None = None,
        traffic: Traffic | None = None,
        counters: DeliveryCounters | None = None,
        stream_limits: StreamLimits | None = None,
    ) -> None:
        super().__init__(
            clock,
            policy=policy,
            ids=ids,
            traffic=traffic,
            counters=counters,
            stream_limits=stream_limits,
        )
        # Redis keeps what it is given (AOF), so persistent headers mean something.
        self.persistent = True
        # Refused (docs/cluster.md): one node's memory would hold what every node must see.
        self.scheduled = None
        self.retained = None
        # Every node consumes from the streams: no node sees all consumers.
        self.shared_queues = True
        self.url = url
        self.node_timeout = node_timeout
        self.names = Names(url.prefix)
        self.loop: Any = None
        self.client: Any = None
        self.writer: Any = None
        self._subscriber: Any = None
        #: How often Redis closed the pub/sub connection and it came back.
        self.pubsub_reconnects = 0
        self._listener: asyncio.Task[None] | None = None
        self._loops: list[LoopingCall] = []
        # Streams live in Redis; this node keeps mirrors of those it reads.
        limits = stream_limits or StreamLimits()
        self.streams = Streams(
            clock, limits, RedisStreamBackend(self._writer, self.names), complete=False
        )
        self.redis_streams = RedisStreams(
            self.streams, self._writer, self.names, self.ids.node, limits
        )
        #: This node's copy of the registry of durable subscriptions.
        self.durables = Durables(self)
        #: This node's figures for the others, and theirs (cluster-wide statistics).
        self.figures = FiguresExchange(self)
        #: Where the nodes find each other's resumable sessions (share_resumption).
        self.resumes: RedisResumeDirectory | None = None

    # -- life cycle ----------------------------------------------------------------------

    def open(self) -> None:
        """
        Check that the reactor runs asyncio, and make the clients (they connect in
        :meth:`recover`).

        :raises EngineUnavailable: on another reactor.
        """
        self.loop = check_reactor(self.clock)
        self.client = make_client(self.url)
        self._subscriber = make_client(self.url, forever=True)
        node = self.ids.node
        self.writer = Writer(
            self.client, self.loop, lambda payloads: pack_batch(node, payloads)
        )

    def recover(self) -> Deferred[None]:
        """
        Connect and check the server, subscribe to the topics, and announce this
        node; queues' messages stay in Redis, and are read once consumers come.

        :returns: a Deferred that fires once clients may be let in, or fails
            with :class:`~stompbroker.broker.engine.redis.connection.EngineUnavailable`.
        """
        return run(self.loop, self._start())

    async def _start(self) -> None:
        version = await check_server(self.client, self.url)
        pubsub = self._subscriber.pubsub()
        await pubsub.psubscribe(self.names.topics, self.names.streams)
        channels = [self.names.inbox(self.ids.node), self.names.control]
        if self.resumes is not None:
            channels.append(self.resumes.channel)
        await pubsub.subscribe(*channels)
        # redis-py connects this connection again by itself when Redis closes
        # it, and subscribes again, without a word: say it, since what other
        # nodes published meanwhile never reaches this node.
        pubsub.connection.register_connect_callback(self._subscribed_again)
        self._listener = self.loop.create_task(listen(self, pubsub))
        await self._announce()
        await self.durables.load().asFuture(self.loop)
        beat = LoopingCall(self._beat)
        beat.clock = self.clock
        beat.start(self.node_timeout / 3, now=False)
        scan = LoopingCall(self._scan)
        scan.clock = self.clock
        scan.start(self.node_timeout / 2, now=False)
        figures = LoopingCall(self.figures.tick)
        figures.clock = self.clock
        figures.start(FIGURES_INTERVAL, now=True)
        self._loops = [beat, scan, figures]
        if self.resumes is not None:
            records = LoopingCall(self.resumes.tick)
            records.clock = self.clock
            records.start(FIGURES_INTERVAL, now=True)
            self._loops.append(records)
        log.info(
            "redis engine: node {node} on {url} (Redis {version}), node timeout {timeout} s",
            node=self.ids.node,
            url=self.url.masked,
            version=version,
            timeout=self.node_timeout,
        )

    def _subscribed_again(self, connection: Any) -> None:
        """
        The pub/sub connection is back after Redis closed it: Redis went away,
        or closed it because this node read too slowly (``client-output-buffer-limit
        pubsub``, docs/cluster.md); redis-py has subscribed again.
        """
        self.pubsub_reconnects += 1
        log.warn(
            "Redis closed this node's pub/sub connection and it is subscribed again"
            " (closings so far: {count}): topic messages other nodes published meanwhile"
            " did not reach this node's subscribers; if Redis's log says 'output buffer"
            " limits', this node reads them slower than they are published"
            " (docs/cluster.md, 'Cross-node topic messages and a slow node')",
            count=self.pubsub_reconnects,
        )

    async def _announce(self) -> None:
        await self.client.set(
            self.names.alive(self.ids.node), b"1", px=int(self.node_timeout * 1000)
        )

    def _beat(self) -> None:
        """Keep this node's liveness key alive."""
        self.writer.command(
            "SET", self.names.alive(self.ids.node), b"1", "PX", int(self.node_timeout * 1000)
        )

    # A remote engine answers later: IEngine.nodes allows a Deferred.
    def nodes(self) -> Deferred[list[Node]]:  # type: ignore[override]
        """
        :returns: a Deferred firing with every node whose liveness key is in the
            server now (this one first), for ``GET /api/nodes``; a node killed
            drops out within ``--node-timeout``.
        """
        return run(self.loop, self._live_nodes())

    async def _live_nodes(self) -> list[Node]:
        prefix = self.names.alive("")
        names = [
            (key.decode() if isinstance(key, bytes) else key)[len(prefix) :]
            async for key in self.client.scan_iter(match=self.names.nodes(), count=100)
        ]
        here = self.ids.node
        ordered = sorted(names, key=lambda name: (name != here, name))
        return [Node(name, name == here, "redis") for name in ordered]

    def _writer(self) -> Any:
        """:returns: the writer (made when the engine opens)."""
        return self.writer
    def share(self, figures: Any) -> None:
        """Share what ``figures()`` returns with the other nodes, every second."""
        self.figures.source = figures

    def share_resumption(self, book: Any) -> None:
        """
        Let a client resume on any node: file ``book``'s sessions in Redis, and
        find and hand over sessions between nodes (:mod:`.resumes`).  Called
        before the engine opens.
        """
        self.resumes = RedisResumeDirectory(self, book)

    def cluster(self) -> ClusterView:
        """:returns: the latest view of the other nodes and of what waits unread in Redis."""
        return self.figures.view

    def _scan(self) -> None:
        """
        Look for what dead nodes held in the queues this node consumes from, and
        trim the streams it knows for age, and read the registry of durable
        subscriptions again.
        """
        self.redis_streams.trim()
        self.durables.load().addErrback(self._scan_failed, "the durable subscriptions")
        for queue in [*self.queues.values(), *self.durables.queues.values()]:
            if isinstance(queue, StreamQueue) and queue.consumers:
                claimed = run(self.loop, queue.claim_from_dead())
                claimed.addErrback(self._scan_failed, queue.destination)

    def _scan_failed(self, failure: Any, destination: str) -> None:
        if failure.check(RedisUnreachable, *CONNECTION_ERRORS):
            return
        log.failure("claiming {queue} from dead nodes failed", failure, queue=destination)

    def stop(self, drained: Deferred[None]) -> Deferred[None]:
        """
        Once the connections are closed (what their consumers held is back in the
        streams), send the last writes, leave, and disconnect.
        """
        if self.writer is None:
            return drained
        return drained.addCallback(lambda _: run(self.loop, self._stop()))

    async def _stop(self) -> None:
        if not self._loops:
            # It never started (the server was not there, or refused us).
            await self._subscriber.aclose()
            await self.client.aclose()
            return
        for call in self._loops:
            if call.running:
                call.stop()
        for queue in list(self.queues.values()):
            if isinstance(queue, StreamQueue):
                queue.close()
        self.durables.close()
        if self.resumes is not None:
            self.resumes.close()
        try:
            await asyncio.wait_for(self.writer.drained(), STOP_TIMEOUT)
            await self.client.delete(self.names.alive(self.ids.node))
            await self.figures.leave()
        except (TimeoutError, *CONNECTION_ERRORS) as error:
            log.warn("left Redis without its last writes: {error}", error=str(error))
        if self._listener is not None:
            self._listener.cancel()
        await self._subscriber.aclose()
        await self.client.aclose()

    # -- routing ---------------------------------------------------------------------------

    def _check_connected(self) -> None:
        if not self.writer.connected:
            raise RedisUnreachable(
                "broker unavailable",
                "the broker's Redis server is unreachable; the broker is reconnecting:"
                " send again later",
            )

    def publish_topic(self, message: Message) -> None:
        """
        Fan a topic message out here, publish it to the other nodes, and add it to
        the streams of the durable subscriptions it matches (a persistent one is
        there already).
        """
        if not self.writer.connected:
            self._check_connected()
        LocalEngine.publish_topic(self, message)
        if not (message.expires and message.expires <= self.clock.seconds()):
            payload = encode(self.ids.node, message)
            self.writer.publish(self.names.topic(message.destination), payload)
            if not message.persistent:
                for durable in self.durables.streams(message.destination):
                    self.writer.command("XADD", durable.stream, "*", "m", payload)

    def publish_queue(self, message: Message) -> None:
        """Add a message to its queue's stream (a persistent one is there already)."""
        if not self.writer.connected:
            self._check_connected()
        self.traffic.published(message)
        if not message.persistent:
            self.writer.command(
                "XADD",
                self.names.queue(message.destination),
                "*",
                "m",
                encode(self.ids.node, message),
            )

    def publish_reply(self, message: Message) -> None:
        """Put a reply on its temporary queue, here or on the node that owns it."""
        if message.destination in self.queues:
            LocalEngine.publish_reply(self, message)
            return
        owner = _reply_queue_node(message.destination)
        if owner is None or owner == self.ids.node:
            LocalEngine.publish_reply(self, message)
            return
        self._check_connected()
        self.traffic.published(message)
        self.writer.command("PUBLISH", self.names.inbox(owner), encode(self.ids.node, message))

    def keep(self, message: Message) -> Deferred[None] | None:
        """
        Add a persistent message to its queue's stream, or to the streams of the
        durable subscriptions its topic matches, before it is acknowledged.

        :returns: a Deferred that fires once Redis has it (see docs/cluster.md for
            what ``appendfsync`` then promises), or fails with
            :class:`~stompbroker.broker.engine.redis.connection.RedisUnreachable`;
            ``None`` for a topic message no durable subscription takes.
        """
        destination = message.destination
        if destination.startswith(QUEUE_PREFIX):
            streams = [self.names.queue(destination)]
        else:
            streams = [durable.stream for durable in self.durables.streams(destination)]
            if not streams:
                return None
        self._check_connected()
        if message.expires and message.expires <= self.clock.seconds():
            return None
        payload = encode(self.ids.node, message)
        for stream in streams[:-1]:
            self.writer.command("XADD", stream, "*", "m", payload)
        # One pipeline at a time, in order: the last reply means Redis has them all.
        stored: Deferred[Any] = self.writer.command_waited("XADD", streams[-1], "*", "m", payload)
        return stored.addCallback(_nothing)

    # -- queues ------------------------------------------------------------------------------

    def queue(self, destination: str) -> Any:
        """:returns: this node's handle on a ``/queue/`` destination's stream."""
        queue = self.queues.get(destination)
        if queue is None:
            queue = self.queues[destination] = StreamQueue(destination, self)
        return queue

    def release_queue(self, queue: Any) -> None:
        """
        A consumer has left: drop this node's handle when it has no consumers left
        (the queue lives on in Redis).
        """
        if isinstance(queue, DurableStreamQueue):
            if not queue.consumers:
                queue.close()
            return
        if isinstance(queue, StreamQueue):
            if not queue.consumers:
                self.queues.pop(queue.destination, None)
                queue.close()
            return
        super().release_queue(queue)

    # -- durable subscriptions -------------------------------------------------------------

    def publish_stream(self, message: Message) -> Deferred[None]:
        """
        Append a message to its stream in Redis; this node's readers, as every
        node's, get it from the stream's channel.

        :returns: a Deferred that fires once Redis has it.
        """
        if not self.writer.connected:
            self._check_connected()
        self.traffic.published(message)
        return self.redis_streams.append(message)

    def stream_reader(self, destination: str, start: StreamStart) -> StreamReader:
        """:returns: a cursor on the shared stream at ``start`` (see :mod:`.streams`)."""
        return self.redis_streams.reader(destination, start)

    def durable_queue(self, durable: tuple[str, str], pattern: str) -> Any:
        """
        Find or make a durable subscription, whose backlog is a stream in Redis
        (:mod:`~stompbroker.broker.engine.redis.durables`).

        :raises DuplicateSubscription: if it is consumed here on another pattern.
        """
        return self.durables.subscribe(durable, pattern)

    def remove_durable(self, durable: tuple[str, str]) -> Deferred[Any]:
        """
        Delete a durable subscription and its backlog, on every node.

        :raises UnknownSubscription: if there is none.
        """
        return self.durables.remove(durable)


def _reply_queue_node(destination: str) -> str | None:
    """:returns: the node token in a ``/reply-queue/tmp-NODE-N`` name, or ``None``."""
    name = destination[len(REPLY_QUEUE_PREFIX) :]
    parts = name.split("-")
    if len(parts) == 3 and parts[0] == "tmp":
        return parts[1]
    return None

