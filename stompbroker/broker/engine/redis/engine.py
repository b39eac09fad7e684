"""
:class:`RedisEngine`: the state of destinations in a Redis server shared by
every node (broker process) started with the same ``--engine`` URL.

It is assembled from the parts the local engine
(:class:`~stompbroker.broker.engine.local.LocalEngine`) is made of for
everything that belongs to this node's connections (the topic fan-out to its
subscribers, :mod:`~stompbroker.broker.engine.fanout`; topic subscriptions' own
queues and temporary queues, :mod:`~stompbroker.broker.engine.queue_table`),
plus Redis for what the nodes share:

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
from collections.abc import Callable
from typing import Any

from twisted.internet.defer import Deferred
from twisted.internet.task import LoopingCall
from zope.interface import implementer

from stompbroker.broker.engine.base import IEngine, Node
from stompbroker.broker.engine.capabilities import REDIS, Capabilities
from stompbroker.broker.engine.fanout import Bookkeeping, TopicFanout
from stompbroker.broker.engine.figures import ClusterView, TopicGaps
from stompbroker.broker.engine.local import DEFAULT_POLICY
from stompbroker.broker.engine.queue_table import QueueTable, bind_local_parts
from stompbroker.broker.engine.redis.codec import (
    Names,
    encode,
    pack_batch,
)
from stompbroker.broker.engine.redis.connection import (
    CONNECTION_ERRORS,
    PRIMARY_ONLY,
    Durability,
    RedisUnreachable,
    check_reactor,
    check_server,
    close_client,
    make_client,
    make_writer,
    run,
)
from stompbroker.broker.engine.redis.control import ControlChannel, Snapshot
from stompbroker.broker.engine.redis.durables import Durables
from stompbroker.broker.engine.redis.failover import FailoverWatch, follow_failovers
from stompbroker.broker.engine.redis.figures import FIGURES_INTERVAL, FiguresExchange
from stompbroker.broker.engine.redis.lanes import LaneMarks
from stompbroker.broker.engine.redis.listener import alone, listen
from stompbroker.broker.engine.redis.liveness import Liveness
from stompbroker.broker.engine.redis.outage import DEFAULT_OUTAGE_HOLD, Outage, unreachable_text
from stompbroker.broker.engine.redis.presence import ClusterPresence
from stompbroker.broker.engine.redis.queue_actions import ClusterQueueActions
from stompbroker.broker.engine.redis.queue_names import QueueNames
from stompbroker.broker.engine.redis.queues import StreamQueue
from stompbroker.broker.engine.redis.resumes import RedisResumeDirectory
from stompbroker.broker.engine.redis.retained import ClusterRetained
from stompbroker.broker.engine.redis.scheduling import ClusterScheduling
from stompbroker.broker.engine.redis.scripts import Scripts
from stompbroker.broker.engine.redis.shared_limits import SharedLimits
from stompbroker.broker.engine.redis.shared_policies import SharedPolicies
from stompbroker.broker.engine.redis.streams import RedisStreamBackend, RedisStreams
from stompbroker.broker.engine.redis.url import EngineURL
from stompbroker.broker.features.browsing import Waiting
from stompbroker.broker.features.policies import Policies
from stompbroker.broker.flow.traffic import Traffic
from stompbroker.broker.queueing.delivery import DeliveryCounters, DeliveryPolicy
from stompbroker.broker.queueing.priorities import DEFAULT_PRIORITY
from stompbroker.broker.routing.destinations import QUEUE_PREFIX, REPLY_QUEUE_PREFIX
from stompbroker.broker.routing.ids import Ids
from stompbroker.broker.streams.log import StreamLog
from stompbroker.broker.streams.offsets import StreamLimits, StreamStart
from stompbroker.broker.streams.reader import StreamReader
from stompbroker.broker.streams.registry import Streams
from stompbroker.logs import logger
from stompbroker.protocol.frames import Headers
from stompbroker.protocol.message import Message

__all__ = ["DEFAULT_NODE_TIMEOUT", "RedisEngine"]

log = logger("stompbroker.broker.engine.redis")

#: Seconds after which a silent node counts as dead, and its messages go elsewhere.
DEFAULT_NODE_TIMEOUT = 10.0
#: Seconds; the longest wait between two attempts to bring the pub/sub connection back.
PUBSUB_BACKOFF_CAP = 0.25
#: The longest a stopping node waits for its last writes.
STOP_TIMEOUT = 5.0


def _nothing(result: Any) -> None:
    return None


@implementer(IEngine)
class RedisEngine:
    """
    Destinations shared with every node on the same Redis server and prefix.

    :param clock: Twisted's asyncio reactor (any other is refused by :meth:`open`).
    :param url: where Redis is (:func:`~stompbroker.broker.engine.redis.url.parse_engine`).
    :param policy: as the local engine's.
    :param node_timeout: seconds after which a node that stopped answering is
        dead, and what its consumers held goes to other nodes' consumers.
    :param ids: the broker's ids; their node token names this node in Redis.
    :param outage_hold: seconds publishers and receipts are held while Redis is
        away, before they get an ERROR (``--engine-outage-hold``; :mod:`.outage`).
    :param durability: what a persistent SEND's RECEIPT waits for besides the
        primary (``--engine-wait-replicas``).

    :ivar names: the Redis key and channel names.
    :ivar writer: the :class:`~stompbroker.broker.engine.redis.connection.Writer`
        every write goes through (set by :meth:`open`).
    """

    # The IEngine methods its local parts answer (bind_local_parts), as the
    # local engine's: topic subscriptions, reply queues, look-ups of handles.
    add_subscriber: Callable[..., None]
    remove_subscriber: Callable[..., None]
    subscription_queue: Callable[..., Any]
    remove_subscription_queue: Callable[..., None]
    topic_subscriptions: Callable[..., Any]
    report_deliveries: Callable[..., None]
    new_reply_queue: Callable[..., Any]
    local_queue: Callable[..., Any]
    delete_queue: Callable[..., None]
    find_queue: Callable[..., Any]
    watch_queues: Callable[..., None]
    unwatch_queues: Callable[..., None]
    queues_here: Callable[..., Any]
    find_durable: Callable[..., Any]
    durables_here: Callable[..., Any]

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
        outage_hold: float = DEFAULT_OUTAGE_HOLD,
        durability: Durability = PRIMARY_ONLY,
    ) -> None:
        self.clock = clock
        self.durability = durability
        #: Whether Redis is away, and the hold of publishers and receipts meanwhile.
        self.outage = Outage(clock, outage_hold)
        #: What pauses publishers during an outage, and counts the writer's memory.
        self._alarm: Any = None
        self.policy = policy
        self.books = Bookkeeping.of(ids, traffic, counters)
        self.ids = self.books.ids
        self.traffic = self.books.traffic
        self.counters = self.books.counters
        #: This node's queues: handles on the shared streams of ``/queue/``
        #: destinations, and local queues for temporary queues.
        #: The per-destination policies: the configuration's, this node's own, and
        #: those set at run time on any node (:mod:`.shared_policies`, docs/cluster.md).
        self.policies = Policies(policy)
        self.table = QueueTable(
            clock, policy, self.books, shared=self._stream_queue, policies=self.policies
        )
        self.queues: dict[str, Any] = self.table.queues
        self.durable: dict[tuple[str, str], Any] = self.table.durable
        self.dead_letters = self.table.dead_letters
        #: This node's topic subscribers, fed what is sent here and what other nodes publish.
        self.fanout = TopicFanout(clock, self.books, self.dead_letters, self.table.new_queue)
        bind_local_parts(self, self.fanout, self.table)
        self.url = url
        self.node_timeout = node_timeout
        self.names = Names(url.prefix)
        self.loop: Any = None
        self.client: Any = None
        #: A client that never sends a command again by itself: the writer's
        #: and the queues' reads (a lost reply must be seen as one).
        self.unretried: Any = None
        self.writer: Any = None
        #: Follows a Sentinel failover (``redis+sentinel://`` only; :meth:`open`).
        self.failover: FailoverWatch | None = None
        #: The queues' scripts (made when the engine opens).
        self.scripts: Any = None
        #: Where a message of a priority goes: its queue's stream or lane (:mod:`.lanes`).
        self.lanes = LaneMarks(url.prefix)
        self._subscriber: Any = None
        #: How often Redis closed the pub/sub connection and it came back.
        self.pubsub_reconnects = 0
        #: Topic subscriptions told of those gaps (``cluster-gap:true``).
        self.gap_subscriptions = 0
        self._listener: asyncio.Task[None] | None = None
        #: ``(deliver, payload)``: runs the fan-out of a batch other nodes
        #: published, or the hand-out of what a queue's read gave, so that each
        #: connection's frames of it leave in one write (the app sets the
        #: transports' write coalescer here).
        self.deliver_together: Callable[[Callable[[Any], object], Any], None] = alone
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
        #: This node's liveness key, and the claiming of what dead nodes held.
        self.liveness = Liveness(self)
        #: Where the nodes find each other's resumable sessions (share_resumption).
        self.resumes: RedisResumeDirectory | None = None
        #: Who subscribes to what, on every node (share_presence; :mod:`.presence`).
        self.presence: ClusterPresence | None = None
        #: This node's copy of the retained messages, and their writes (:mod:`.retained`).
        self.retained = ClusterRetained(self)
        #: The cluster's scheduled messages, once the router asks (:meth:`scheduling`).
        self.scheduled: ClusterScheduling | None = None
        #: The nodes' requests to each other about the queues they read (:mod:`.control`).
        self.control = ControlChannel(self)
        #: The management's purge, move, copy and retry across nodes (:meth:`shared_queues`).
        self._actions: ClusterQueueActions | None = None
        #: The cluster's queue names, for wildcard consumers (:mod:`.queue_names`).
        self.queue_names = QueueNames(self)
        self._named = self.queue_names.known
        self.watch_queues = self.queue_names.watch
        self.unwatch_queues = self.queue_names.unwatch
        #: The policies set at run time on any node, in Redis (:mod:`.shared_policies`).
        self.shared_policies = SharedPolicies(self, self.policies)
        #: The policies' limits and TTLs on the shared queues' streams (:mod:`.shared_limits`).
        self.limits = SharedLimits(self.policies, policy.dead_letter_prefix)
        #: Channels of this engine's features -> what takes their messages (the listener).
        self.channels: dict[bytes, Callable[[bytes], None]] = {
            self.retained.channel.encode(): self.retained.notice,
            self.control.requests.encode(): self.control.requested,
            self.control.answers.encode(): self.control.answered,
            self.queue_names.channel.encode(): self.queue_names.notice,
            self.shared_policies.channel.encode(): self.shared_policies.notice,
        }

    # -- what it is --------------------------------------------------------------------

    def capabilities(self) -> Capabilities:
        """:returns: what the shared queues do not do yet (docs/cluster.md)."""
        return REDIS

    def bookkeeping(self) -> Bookkeeping:
        """:returns: this node's ids and counters."""
        return self.books

    # -- life cycle ----------------------------------------------------------------------

    def open(self) -> None:
        """
        Check that the reactor runs asyncio, and make the clients (they connect in
        :meth:`recover`).

        :raises EngineUnavailable: on another reactor.
        """
        self.loop = check_reactor(self.clock)
        self.client = make_client(self.url)
        self.unretried = make_client(self.url, retries=0)
        self.scripts = Scripts(self.client)
        # Topic messages published while it is away are lost for this node:
        # try again every quarter second at most, not every 2 s.
        self._subscriber = make_client(self.url, forever=True, backoff_cap=PUBSUB_BACKOFF_CAP)
        node = self.ids.node
        self.writer = make_writer(
            self.url,
            self.loop,
            lambda payloads: pack_batch(node, payloads),
            outage=self.outage,
            back=self._reconnected,
            durability=self.durability,
        )
        # With Sentinel: drop every connection to the old primary as soon as
        # the Sentinels announce a new one (docs/cluster.md, "Replica and Sentinel").
        self.failover = follow_failovers(
            self.url,
            self.loop,
            [self.client, self.unretried, self._subscriber, self.writer.client],
            self.writer.primary_moved,
            self.writer.pause,
        )
        if self._alarm is not None:
            self.outage.watch(self._alarm)
            self._alarm.count_held(self.writer)

    def report_outages(self, alarm: Any) -> None:
        """
        Pause publishers through ``alarm`` while Redis is away, up to the hold, and
        count what the writer holds meanwhile in the memory in use.  Called before
        the engine opens.

        :param alarm: the broker's back-pressure (``alarm_on``, ``alarm_off``,
            ``count_held``).
        """
        self._alarm = alarm

    def _reconnected(self) -> None:
        """Redis answers again: every queue read here reconciles its pending list."""
        for queue in [*self.queues.values(), *self.durables.queues.values()]:
            if isinstance(queue, StreamQueue):
                queue.reconnected()

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
        if self.failover is not None:
            self.failover.start(getattr(self.client.connection_pool, "master_address", None))
        pubsub = self._subscriber.pubsub()
        await pubsub.psubscribe(self.names.topics, self.names.streams)
        channels = [self.names.inbox(self.ids.node), self.names.control]
        channels.extend(channel.decode() for channel in self.channels)
        if self.resumes is not None:
            channels.append(self.resumes.channel)
        await pubsub.subscribe(*channels)
        # redis-py connects this connection again by itself when Redis closes
        # it, and subscribes again, without a word: say it, since what other
        # nodes published meanwhile never reaches this node.
        pubsub.connection.register_connect_callback(self._subscribed_again)
        self._listener = self.loop.create_task(listen(self, pubsub))
        await self.liveness.announce()
        await self.durables.load().asFuture(self.loop)
        await self.retained.load().asFuture(self.loop)
        if self.presence is not None:
            await self.presence.load().asFuture(self.loop)
        # The configuration's policies are in by now: share what operators change from here on.
        self.policies.share(self.shared_policies)
        await self.shared_policies.load().asFuture(self.loop)
        beat = LoopingCall(self.liveness.beat)
        beat.clock = self.clock
        beat.start(self.node_timeout / 3, now=False)
        scan = LoopingCall(self.liveness.scan)
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
        # Every topic subscription here may have missed messages: its next
        # MESSAGE says so (durable subscriptions read streams: nothing lost).
        told = self.fanout.mark_gap()
        self.gap_subscriptions += told
        # Notices of retained messages and new queues may have been missed:
        # read them all again.
        self.retained.load()
        if self.presence is not None:
            self.presence.load()
        self.queue_names.reload()
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
        return TopicGaps(self.pubsub_reconnects, self.gap_subscriptions)

    def nodes(self) -> Deferred[list[Node]]:
        """
        :returns: a Deferred firing with every live node, this one first
            (:meth:`~stompbroker.broker.engine.redis.liveness.Liveness.nodes`).
        """
        return self.liveness.nodes()

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

    def share_presence(self, presence: Any) -> None:
        """Share who subscribes to what with every node (:mod:`.presence`), before opening."""
        self.presence = ClusterPresence(self, presence)
        self.channels[self.presence.channel.encode()] = self.presence.notice

    def cluster(self) -> ClusterView:
        """:returns: the latest view of the other nodes and of what waits unread in Redis."""
        return self.figures.view

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
            await close_client(self._subscriber)
            await close_client(self.client)
            await close_client(self.unretried)
            await self.writer.close()
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
        if self.failover is not None:
            await self.failover.close()
        await close_client(self._subscriber)
        await close_client(self.client)
        await close_client(self.unretried)
        await self.writer.close()

    # -- routing ---------------------------------------------------------------------------

    def _check_connected(self) -> None:
        """
        :raises RedisUnreachable: once Redis has been away longer than the hold;
            within it, messages are queued in the writer (publishers are paused).
        """
        if not self.writer.connected and self.outage.expired:
            raise RedisUnreachable("broker unavailable", unreachable_text(self.outage.lasted()))

    def publish_topic(self, message: Message) -> None:
        """
        Fan a topic message out here, publish it to the other nodes, and add it to
        the streams of the durable subscriptions it matches (a persistent one is
        there already).
        """
        if not self.writer.connected:
            self._check_connected()
        self.fanout.publish(message)
        if not (message.expires and message.expires <= self.clock.seconds()):
            payload = encode(self.ids.node, message)
            self.writer.publish(self.names.topic(message.destination), payload)
            if not message.persistent:
                for durable in self.durables.streams(message.destination):
                    self.writer.command("XADD", durable.stream, "*", "m", payload)

    def publish_queue(self, message: Message) -> Deferred[None] | None:
        """
        Add a message to its queue's stream (a persistent one is there already).

        :returns: ``None``; or, when a policy's ``reject-publish`` limits the
            queue, a Deferred that fails with ``LimitExceeded`` if it is full
            (:mod:`.shared_limits`).
        """
        if not self.writer.connected:
            self._check_connected()
        self.traffic.published(message)
        if not message.persistent:
            destination = message.destination
            if destination not in self._named:
                self.queue_names.met(destination)
            stream = self.names.queue(destination)
            if message.priority != DEFAULT_PRIORITY:
                stream = self.lanes.stream(self.writer, destination, stream, message.priority)
            if message.group is not None:
                self.lanes.grouped(self.writer, destination)
            limit = self.limits.of(destination)
            if limit is not None:
                limit.stamp(message, self.clock.seconds())
                return limit.add(
                    self, message, stream, encode(self.ids.node, message), waited=False
                )
            payload = encode(self.ids.node, message)
            self.writer.command("XADD", stream, "*", "m", payload)
        return None

    def publish_reply(self, message: Message) -> None:
        """Put a reply on its temporary queue, here or on the node that owns it."""
        if message.destination in self.queues:
            self.table.publish_reply(message)
            return
        owner = _reply_queue_node(message.destination)
        if owner is None or owner == self.ids.node:
            self.table.publish_reply(message)
            return
        self._check_connected()
        self.traffic.published(message)
        self.writer.command("PUBLISH", self.names.inbox(owner), encode(self.ids.node, message))

    def keep(self, message: Message) -> Deferred[None] | None:
        """
        Add a persistent message to its queue's stream, or to the streams of the
        durable subscriptions its topic matches, before it is acknowledged.

        :returns: a Deferred that fires once Redis has it (and, with
            ``--engine-wait-replicas``, its replicas; see docs/cluster.md for
            what ``appendfsync`` then promises), or fails with
            :class:`~stompbroker.broker.engine.redis.connection.RedisUnreachable`;
            ``None`` for a topic message no durable subscription takes.
        """
        destination = message.destination
        if destination.startswith(QUEUE_PREFIX):
            if destination not in self._named:
                self.queue_names.met(destination)
            if message.group is not None:
                self.lanes.grouped(self.writer, destination)
            streams = [
                self.lanes.stream(
                    self.writer, destination, self.names.queue(destination), message.priority
                )
            ]
        else:
            streams = [durable.stream for durable in self.durables.streams(destination)]
            if not streams:
                return None
        self._check_connected()
        limit = self.limits.of(destination) if destination.startswith(QUEUE_PREFIX) else None
        if limit is not None:
            limit.stamp(message, self.clock.seconds())
        if message.expires and message.expires <= self.clock.seconds():
            return None
        payload = encode(self.ids.node, message)
        for stream in streams[:-1]:
            self.writer.command("XADD", stream, "*", "m", payload)
        if limit is not None:
            return limit.add(self, message, streams[-1], payload, waited=True)
        # One pipeline at a time, in order: the last reply means Redis has them all.
        stored: Deferred[Any] = self.writer.command_waited(
            "XADD", streams[-1], "*", "m", payload, replicated=True
        )
        return stored.addCallback(_nothing)

    # -- queues ------------------------------------------------------------------------------

    def _stream_queue(self, destination: str) -> StreamQueue:
        """:returns: a new handle on a queue's stream, whose name the cluster's set then holds."""
        if destination not in self._named:
            self.queue_names.met(destination)
        return StreamQueue(destination, self)

    def queue(self, destination: str) -> Any:
        """:returns: this node's handle on a ``/queue/`` destination's stream."""
        return self.table.queue(destination)

    def depth(self, destination: str) -> int:
        """:returns: how many messages this node has read of ``destination`` and not handed out."""
        return self.table.depth(destination)

    def waiting(self, queue: Any) -> Waiting | Deferred[Waiting]:
        """
        :returns: for a ``/queue/``, a Deferred firing with what waits in it
            cluster-wide (:mod:`.control`); for a temporary queue or a durable
            subscription's backlog, what this node holds of it.
        """
        if not isinstance(queue, StreamQueue) or queue.durable is not None:
            return Waiting(tuple(queue.pending), self.ids.node)
        snapshot: Deferred[Snapshot] = run(self.loop, self.control.snapshot(queue.destination))
        return snapshot.addCallback(_waiting)

    def transfer(
        self,
        queue: Any,
        count: int,
        route: Callable[[Message], tuple[str, Headers] | None],
        copy: bool = False,
    ) -> int:
        """Move (or copy) what this node has read of ``queue`` and not handed out."""
        return self.table.transfer(queue, count, route, copy, self.keep, self.publish_topic)

    def shared_queues(self) -> ClusterQueueActions:
        """:returns: the management's operations on queues across nodes (:mod:`.queue_actions`)."""
        if self._actions is None:
            self._actions = ClusterQueueActions(self)
        return self._actions

    def release_queue(self, queue: Any) -> None:
        """
        A consumer has left: drop this node's handle when it has no consumers left
        (the queue lives on in Redis).
        """
        if isinstance(queue, StreamQueue):
            if not queue.consumers:
                if queue.durable is None:
                    self.queues.pop(queue.destination, None)
                queue.close()
            return
        self.table.release(queue)

    # -- destination features -------------------------------------------------------------

    def scheduling(self, fire: Any) -> ClusterScheduling:
        """:returns: the cluster's scheduled messages, in Redis (:mod:`.scheduling`)."""
        scheduled = self.scheduled = ClusterScheduling(self, fire)
        self.channels[scheduled.channel.encode()] = scheduled.notice
        return scheduled

    def retaining(self) -> ClusterRetained:
        """:returns: what ``retain`` does, here and in Redis (:mod:`.retained`)."""
        return self.retained

    def retained_copies(self, pattern: str, selector: Any) -> list[Message]:
        """:returns: what a new subscription to ``pattern`` gets first, from this node's copy."""
        return self.retained.copies(pattern, selector)

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

    def stream_logs(self) -> dict[str, StreamLog]:
        """:returns: the ``/stream/`` destinations this node mirrors -> their logs."""
        return self.streams.logs

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


def _waiting(snapshot: Snapshot) -> Waiting:
    return snapshot.waiting


def _reply_queue_node(destination: str) -> str | None:
    """:returns: the node token in a ``/reply-queue/tmp-NODE-N`` name, or ``None``."""
    name = destination[len(REPLY_QUEUE_PREFIX) :]
    parts = name.split("-")
    if len(parts) == 3 and parts[0] == "tmp":
        return parts[1]
    return None
