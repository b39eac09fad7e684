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
  (:mod:`stompbroker.broker.engine.redis.stream_queue`).
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

The engine is these parts and what binds them; its own jobs are parts too,
each its own object whose methods it binds as its own IEngine methods where
callers reach them: joining and leaving the cluster (:mod:`.lifecycle`), where
a SEND goes (:mod:`.publishing`), and its handles on the shared queues
(:mod:`.queue_handles`).

Statistics: a topic message counts in on the node it was sent to, and as
delivered on each node that delivers it, so that the nodes' counts add up; each
node shares its figures and reads the others' and what waits unread in Redis
(:mod:`stompbroker.broker.engine.redis.figures_exchange`), for statistics of the whole
cluster.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from twisted.internet.defer import Deferred
from zope.interface import implementer

from stompbroker.broker.engine.capabilities import REDIS, Capabilities
from stompbroker.broker.engine.engine_interface import IEngine, Node
from stompbroker.broker.engine.fanout import Bookkeeping, TopicFanout
from stompbroker.broker.engine.local import DEFAULT_POLICY
from stompbroker.broker.engine.node_figures import ClusterView, TopicGaps
from stompbroker.broker.engine.queue_table import QueueTable, bind_local_parts
from stompbroker.broker.engine.queue_transfer import Transferred
from stompbroker.broker.engine.redis.busy import Busy
from stompbroker.broker.engine.redis.cluster_presence import ClusterPresence
from stompbroker.broker.engine.redis.cluster_publishing import ClusterPublishing
from stompbroker.broker.engine.redis.connection import (
    PRIMARY_ONLY,
    Durability,
    check_reactor,
    make_client,
    make_writer,
    run,
)
from stompbroker.broker.engine.redis.control import ControlChannel
from stompbroker.broker.engine.redis.duplicates import ClusterDuplicates
from stompbroker.broker.engine.redis.durables import Durables
from stompbroker.broker.engine.redis.figures_exchange import FiguresExchange
from stompbroker.broker.engine.redis.keys import Keys
from stompbroker.broker.engine.redis.lanes import LaneMarks
from stompbroker.broker.engine.redis.lifecycle import EngineLifecycle
from stompbroker.broker.engine.redis.listener import alone
from stompbroker.broker.engine.redis.liveness import Liveness
from stompbroker.broker.engine.redis.outage import DEFAULT_OUTAGE_HOLD, Outage
from stompbroker.broker.engine.redis.ping import DEFAULT_PING_TIMEOUT
from stompbroker.broker.engine.redis.queue_actions import ClusterQueueActions
from stompbroker.broker.engine.redis.queue_credit import QueueCredit
from stompbroker.broker.engine.redis.queue_handles import QueueHandles
from stompbroker.broker.engine.redis.queue_names import QueueNames
from stompbroker.broker.engine.redis.resumes import RedisResumeDirectory
from stompbroker.broker.engine.redis.retained import ClusterRetained
from stompbroker.broker.engine.redis.scheduling import ClusterScheduling
from stompbroker.broker.engine.redis.shared_expiry import SharedExpiry
from stompbroker.broker.engine.redis.shared_limits import SharedLimits
from stompbroker.broker.engine.redis.shared_policies import SharedPolicies
from stompbroker.broker.engine.redis.streams import RedisStreamBackend, RedisStreams
from stompbroker.broker.engine.redis.topic_batches import batch_head, pack
from stompbroker.broker.engine.redis.url import EngineURL
from stompbroker.broker.engine.redis.user_actions import ClusterUserActions
from stompbroker.broker.features.browsing import Waiting
from stompbroker.broker.features.policies import Policies
from stompbroker.broker.flow.traffic import Traffic
from stompbroker.broker.queueing.delivery import DeliveryCounters, DeliveryPolicy
from stompbroker.broker.routing.ids import Ids
from stompbroker.broker.streams.log import StreamLog
from stompbroker.broker.streams.offsets import StreamLimits, StreamStart
from stompbroker.broker.streams.reader import StreamReader
from stompbroker.broker.streams.registry import Streams
from stompbroker.protocol.frames import Headers
from stompbroker.protocol.message import Message

__all__ = ["DEFAULT_NODE_TIMEOUT", "RedisEngine"]

#: Seconds after which a silent node counts as dead, and its messages go elsewhere.
DEFAULT_NODE_TIMEOUT = 10.0


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
    :param ping_timeout: seconds Redis may take to answer a ``PING`` before it
        counts as away (``--engine-ping-timeout``; :mod:`.ping`).
    :param durability: what a persistent SEND's RECEIPT waits for besides the
        primary (``--engine-wait-replicas``).

    :ivar names: the Redis key and channel names.
    :ivar writer: the :class:`~stompbroker.broker.engine.redis.writer.Writer`
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
    # The IEngine methods its routing answers (:mod:`.publishing`).
    publish_topic: Callable[[Message], None]
    publish_queue: Callable[[Message], Deferred[None] | None]
    publish_reply: Callable[[Message], None]
    publish_stream: Callable[[Message], Deferred[None]]
    keep: Callable[[Message], Deferred[None] | None]
    _check_connected: Callable[[], None]
    # The IEngine methods its shared queues' handles answer (:mod:`.queue_handles`).
    waiting: Callable[[Any], Waiting | Deferred[Waiting]]
    shared_queues: Callable[[], ClusterQueueActions]
    release_queue: Callable[[Any], None]

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
        ping_timeout: float = DEFAULT_PING_TIMEOUT,
        durability: Durability = PRIMARY_ONLY,
    ) -> None:
        if ping_timeout <= 0:
            raise ValueError(f"--engine-ping-timeout must be more than 0 s, got {ping_timeout}")
        self.clock = clock
        self.ping_timeout = ping_timeout
        #: The bound on what the writer holds for a slow Redis, and its alarm.
        self.busy = Busy(clock)
        #: Which queues take in faster than this node's consumers take out, and the hold of
        #: their publishers here.
        self.credit = QueueCredit(clock)
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
        #: This node's handles on the shared queues (:mod:`.queue_handles`).
        self.handles = QueueHandles(self)
        self.waiting = self.handles.waiting
        self.shared_queues = self.handles.shared_queues
        self.release_queue = self.handles.release_queue
        self.table = QueueTable(
            clock, policy, self.books, shared=self.handles.stream_queue, policies=self.policies
        )
        self.queues: dict[str, Any] = self.table.queues
        self.durable: dict[tuple[str, str], Any] = self.table.durable
        self.dead_letters = self.table.dead_letters
        #: This node's topic subscribers, fed what is sent here and what other nodes publish.
        self.fanout = TopicFanout(clock, self.books, self.dead_letters, self.table.new_queue)
        bind_local_parts(self, self.fanout, self.table)
        self.url = url
        self.node_timeout = node_timeout
        self.names = Keys(url.prefix)
        self.loop: Any = None
        self.client: Any = None
        #: A client that never sends a command again by itself: the writer's
        #: and the queues' reads (a lost reply must be seen as one).
        self.unretried: Any = None
        self.writer: Any = None
        #: Where a message of a priority goes: its queue's stream or lane (:mod:`.lanes`).
        self.lanes = LaneMarks(url.prefix)
        #: ``(deliver, payload)``: runs the fan-out of a batch other nodes
        #: published, or the hand-out of what a queue's read gave, so that each
        #: connection's frames of it leave in one write (the app sets the
        #: transports' write coalescer here).
        self.deliver_together: Callable[[Callable[[Any], object], Any], None] = alone
        # Streams live in Redis; this node keeps mirrors of those it reads.
        limits = stream_limits or StreamLimits()
        self.streams = Streams(
            clock,
            limits,
            RedisStreamBackend(self._writer, self.names),
            complete=False,
            traffic=self.traffic,
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
        #: The cluster's queue names, for wildcard consumers (:mod:`.queue_names`).
        self.queue_names = QueueNames(self)
        self.watch_queues = self.queue_names.watch
        self.unwatch_queues = self.queue_names.unwatch
        #: The policies set at run time on any node, in Redis (:mod:`.shared_policies`).
        self.shared_policies = SharedPolicies(self, self.policies)
        #: The policies' limits and TTLs on the shared queues' streams (:mod:`.shared_limits`).
        self.limits = SharedLimits(self.policies, policy.dead_letter_prefix)
        #: The policies' queue ``expires`` on the shared queues (:mod:`.shared_expiry`).
        self.expiry = SharedExpiry(self, self.policies)
        #: Channels of this engine's features -> what takes their messages (the listener).
        self.channels: dict[bytes, Callable[[bytes], None]] = {
            self.retained.channel.encode(): self.retained.notice,
            self.control.requests.encode(): self.control.requested,
            self.control.answers.encode(): self.control.answered,
            self.queue_names.channel.encode(): self.queue_names.notice,
            self.shared_policies.channel.encode(): self.shared_policies.notice,
        }
        #: Joining the cluster, leaving it, the pub/sub connection's returns (:mod:`.lifecycle`).
        self.life = EngineLifecycle(self)
        #: Where what is sent here goes (:mod:`.publishing`): bound as this engine's own.
        self.publishing = ClusterPublishing(self)
        self.publish_topic = self.publishing.publish_topic
        self.publish_queue = self.publishing.publish_queue
        self.publish_reply = self.publishing.publish_reply
        self.publish_stream = self.publishing.publish_stream
        self.keep = self.publishing.keep
        self._check_connected = self.publishing.check_connected
        #: Duplicate detection, its windows in Redis, shared by every node (:mod:`.duplicates`).
        self.duplicates = ClusterDuplicates(
            self._writer, self.publishing, self.names, self.policies, self.traffic
        )

    # -- what it is --------------------------------------------------------------------

    def capabilities(self) -> Capabilities:
        """:returns: what the shared queues do not do yet (docs/cluster.md)."""
        return REDIS

    def bookkeeping(self) -> Bookkeeping:
        """:returns: this node's ids and counters."""
        return self.books

    def duplicate_detection(self) -> ClusterDuplicates:
        """:returns: the cluster's windows of duplicate-detection ids."""
        return self.duplicates

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
        self.life.open()
        head = batch_head(self.ids.node)
        # A batch is one topic channel's: the channel names its destination.
        skip = len(self.names.topic(""))
        self.writer = make_writer(
            self.url,
            self.loop,
            lambda channel, records: pack(head, channel[skip:], records),
            outage=self.outage,
            back=self.life.reconnected,
            durability=self.durability,
            ping_timeout=self.ping_timeout,
            busy=self.busy,
        )
        if self._alarm is not None:
            self.outage.watch(self._alarm)
            self.busy.watch(self._alarm)
            self.credit.watch(self._alarm)
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

    def recover(self) -> Deferred[None]:
        """
        Connect and check the server, subscribe to the topics, and announce this
        node; queues' messages stay in Redis, and are read once consumers come.

        :returns: a Deferred that fires once clients may be let in, or fails
            with :class:`~stompbroker.broker.engine.redis.connection.EngineUnavailable`.
        """
        return run(self.loop, self.life.start())

    def topic_gaps(self) -> TopicGaps:
        """:returns: how often this node missed other nodes' topic messages, and whom it told."""
        return self.life.topic_gaps()

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

    def share_user_actions(self, apply: Any) -> Any:
        """Apply other nodes' actions on users, tell them this node's (:mod:`.user_actions`)."""
        actions = ClusterUserActions(self, apply)
        self.channels[actions.channel.encode()] = actions.notice
        return actions.tell

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
        return drained.addCallback(lambda _: run(self.loop, self.life.stop()))

    # -- queues ------------------------------------------------------------------------------

    def queue(self, destination: str) -> Any:
        """:returns: this node's handle on a ``/queue/`` destination's stream."""
        return self.table.queue(destination)

    def depth(self, destination: str) -> int:
        """:returns: how many messages this node has read of ``destination`` and not handed out."""
        return self.table.depth(destination)

    def transfer(
        self,
        queue: Any,
        count: int,
        route: Callable[[Message], tuple[str, Headers] | None],
        copy: bool = False,
    ) -> Transferred | Deferred[Transferred]:
        """Move (or copy) what this node has read of ``queue`` and not handed out."""
        return self.table.transfer(queue, count, route, copy, self.keep, self.publish_topic)

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
