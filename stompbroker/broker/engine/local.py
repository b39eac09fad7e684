"""
The in-process engine: destinations' state in this process's memory, persistent
messages in a message store.

Where a subscription takes its messages from:

- an ``auto``-ack topic subscription sits in the :class:`TopicTree` itself, and a
  SEND reaches it with one ``deliver`` call: no queue, no bookkeeping
  (at-most-once);
- every other subscription is a consumer of a
  :class:`~stompbroker.broker.queueing.queues.WorkerQueue`: the named queue for
  ``/queue/``, the connection's own for ``/temp-queue/``, and for a topic
  subscription with client acknowledgements or a durable name a queue of its
  own, which sits in the tree in its place and collects what the topic routes
  to it.

Routing a SEND to a topic costs one lookup in the tree (cached per destination)
and one ``deliver`` per matching subscription; nothing on that path logs, raises
or creates a Deferred, and every method the router calls per message returns
``None`` but :meth:`LocalEngine.keep`.

Persistent messages (see :mod:`stompbroker.broker.store.journal`): with a store,
the router files a persistent message with :meth:`LocalEngine.keep` under each
key that keeps it (its queue, or the durable subscriptions its topic matches
now), then routes it; the queues tell the store what becomes of it.  At start,
:meth:`LocalEngine.recover` rebuilds queues and durable subscriptions from the
store (:mod:`stompbroker.broker.store.recovery`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from twisted.internet.defer import Deferred, succeed
from zope.interface import implementer

from stompbroker.broker.engine.capabilities import LOCAL, Capabilities
from stompbroker.broker.engine.duplicate_detection import DuplicateDetection
from stompbroker.broker.engine.durable_rules import reusable_durable, unknown_durable
from stompbroker.broker.engine.engine_interface import IEngine, Node
from stompbroker.broker.engine.fanout import Bookkeeping, TopicFanout, TopicSubscriptions
from stompbroker.broker.engine.node_figures import ClusterView, TopicGaps
from stompbroker.broker.engine.queue_table import QueueTable, bind_local_parts
from stompbroker.broker.engine.queue_transfer import Transferred
from stompbroker.broker.features.browsing import Waiting
from stompbroker.broker.features.policies import Policies
from stompbroker.broker.features.retain_rules import RetainedMessages
from stompbroker.broker.features.retaining import Retaining, retained_copies
from stompbroker.broker.features.schedule_rules import ScheduledEntry, Scheduler
from stompbroker.broker.features.schedule_timer import Scheduling
from stompbroker.broker.flow.traffic import Traffic
from stompbroker.broker.queueing.delivery import DeliveryCounters, DeliveryPolicy
from stompbroker.broker.queueing.paging import PagingBudget
from stompbroker.broker.queueing.queues import WorkerQueue
from stompbroker.broker.routing.destinations import TOPIC_PREFIX
from stompbroker.broker.routing.ids import Ids
from stompbroker.broker.store.base import RecoveredState
from stompbroker.broker.store.journal import Journal, durable_key
from stompbroker.broker.store.recovery import rebuild
from stompbroker.broker.streams.log import StreamLog
from stompbroker.broker.streams.offsets import StreamLimits, StreamStart
from stompbroker.broker.streams.reader import StreamReader
from stompbroker.broker.streams.registry import Streams
from stompbroker.broker.streams.sqlite_backend import backend_for
from stompbroker.logs import logger
from stompbroker.protocol.frames import Headers
from stompbroker.protocol.message import Message

log = logger("stompbroker.broker")

DEFAULT_POLICY = DeliveryPolicy()


@implementer(IEngine)
class LocalEngine:
    """
    Topics, queues, durable subscriptions and the store of one broker process,
    assembled from the parts the redis engine shares: the
    :class:`~stompbroker.broker.engine.fanout.TopicFanout`, the
    :class:`~stompbroker.broker.engine.queue_table.QueueTable` and the
    :class:`~stompbroker.broker.engine.fanout.Bookkeeping`.

    :param clock: the reactor (or a ``task.Clock``) that times the queues' work.
    :param policy: how messages are delivered, redelivered, dead-lettered and expired.
    :param store: an :class:`~stompbroker.broker.store.base.IMessageStore`, not
        yet open, that keeps persistent messages and durable subscriptions;
        ``None`` keeps everything in memory only.
    :param ids: the broker's :class:`~stompbroker.broker.routing.ids.Ids`; new ones by default.
    :param traffic: the per-destination counters; new ones by default.
    :param counters: the broker-wide counters; new ones by default.
    :param paging: the memory budget past which the store's queues keep their
        persistent messages on disk only (:mod:`~stompbroker.broker.queueing.paging`);
        ``None`` keeps them all in memory.

    Its topic subscriptions, reply queues and look-ups are its parts' own
    methods (:func:`~stompbroker.broker.engine.queue_table.bind_local_parts`).
    Attributes for its parts (recovery, tests); the broker reads through
    :class:`~stompbroker.broker.engine.engine_interface.IEngine`'s methods only:

    :ivar topics: the topic subscriptions: direct subscribers, and the queues of
        the others.
    :ivar queues: ``/queue/`` and ``/reply-queue/`` destinations -> their queues.
    :ivar durable: ``(client-id, name)`` -> the queue of that durable subscription.
    :ivar journal: the :class:`~stompbroker.broker.store.journal.Journal` over
        ``store``, or ``None``.
    :ivar dead_letters: where the queues' failed messages go.
    :ivar scheduled: the messages held for later delivery (the broker's
        :class:`~stompbroker.broker.features.schedule_timer.Scheduling` times them).
    :ivar retained: each topic's retained message.
    """

    # IEngine methods that are the parts' own (bind_local_parts).
    add_subscriber: Callable[..., None]
    remove_subscriber: Callable[[str, Any], None]
    subscription_queue: Callable[..., WorkerQueue]
    remove_subscription_queue: Callable[[WorkerQueue], None]
    topic_subscriptions: Callable[[str], TopicSubscriptions]
    report_deliveries: Callable[..., None]
    new_reply_queue: Callable[[], WorkerQueue]
    local_queue: Callable[..., WorkerQueue]
    delete_queue: Callable[[WorkerQueue], None]
    find_queue: Callable[[str], WorkerQueue | None]
    watch_queues: Callable[..., None]
    unwatch_queues: Callable[..., None]
    queues_here: Callable[[], list[tuple[str, WorkerQueue]]]
    find_durable: Callable[[tuple[str, str]], WorkerQueue | None]
    durables_here: Callable[[], list[tuple[tuple[str, str], WorkerQueue]]]
    publish_topic: Callable[[Message], None]

    def __init__(
        self,
        clock: Any,
        *,
        policy: DeliveryPolicy = DEFAULT_POLICY,
        store: Any = None,
        ids: Ids | None = None,
        traffic: Traffic | None = None,
        counters: DeliveryCounters | None = None,
        stream_limits: StreamLimits | None = None,
        paging: PagingBudget | None = None,
    ) -> None:
        self.clock = clock
        self.policy = policy
        self.store = store
        self.journal = Journal(store) if store is not None else None
        self._capabilities = LOCAL if store is not None else Capabilities(persistence=False)
        self.books = Bookkeeping.of(ids, traffic, counters)
        self.ids = self.books.ids
        self.traffic = self.books.traffic
        self.counters = self.books.counters
        #: The per-destination policies (:mod:`stompbroker.broker.features.policies`).
        self.policies = Policies(policy)
        self.paging = paging if store is not None else None
        self.table = QueueTable(
            clock, policy, self.books, self.journal, policies=self.policies, paging=self.paging
        )
        self.queues: dict[str, WorkerQueue] = self.table.queues
        self.durable: dict[tuple[str, str], WorkerQueue] = self.table.durable
        self.dead_letters = self.table.dead_letters
        self.fanout = TopicFanout(clock, self.books, self.dead_letters, self.table.new_queue)
        self.topics = self.fanout.tree
        # The router binds this once: the fan-out's own method, no hop per SEND.
        self.publish_topic = self.fanout.publish
        bind_local_parts(self, self.fanout, self.table)
        self.scheduled: Scheduler[Message] = Scheduler()
        self.retained = RetainedMessages()
        #: The ``/stream/`` destinations, kept where the store keeps messages.
        self.streams = Streams(
            clock, stream_limits or StreamLimits(), backend_for(store), traffic=self.traffic
        )
        #: Each destination's recent duplicate-detection ids, kept with persistent messages.
        self.duplicates = DuplicateDetection(clock, self.policies, store, self.traffic)

    # -- what it is --------------------------------------------------------------------

    def capabilities(self) -> Capabilities:
        """:returns: everything, persistence only with a store."""
        return self._capabilities

    def bookkeeping(self) -> Bookkeeping:
        """:returns: this process's ids and counters."""
        return self.books

    def duplicate_detection(self) -> DuplicateDetection:
        """:returns: the destinations' windows of duplicate-detection ids."""
        return self.duplicates

    # -- life cycle ----------------------------------------------------------------

    def open(self) -> None:
        """
        Open the store, if there is one.

        :raises stompbroker.broker.store.base.StoreError: if it cannot be opened.
        """
        if self.store is not None:
            self.store.open()

    def recover(self) -> Deferred[None]:
        """
        Rebuild queues and durable subscriptions from the store (see
        :mod:`stompbroker.broker.store.recovery`).

        :returns: a Deferred that fires once they are back, or fails with what
            stopped it; at once without a store.
        """
        if self.store is None:
            return succeed(None)
        read_ahead = self.paging.read_ahead if self.paging is not None else 0
        recovered: Deferred[RecoveredState] = self.store.recover(read_ahead)
        # Both reads go to the store at once, in one group of its writer.
        streams = self.streams.recover()
        duplicates = self.duplicates.recover()

        def failed(failure: Any) -> Any:
            streams.addErrback(lambda _: None)
            duplicates.addErrback(lambda _: None)
            return failure

        return (
            recovered.addCallbacks(self._rebuild, failed)
            .addCallback(lambda _: streams)
            .addCallback(lambda _: duplicates)
        )

    def _rebuild(self, state: RecoveredState) -> None:
        rebuild(self, state)

    def stop(self, drained: Deferred[None]) -> Deferred[None]:
        """
        Close the store once the connections are gone and what they did is written.

        :param drained: fires when the broker's connections are closed.
        :returns: a Deferred that fires once the store is closed.
        """
        self.streams.stop()
        drained.addCallback(self._log_dropped)
        journal = self.journal
        if journal is None:
            return drained
        # Writes the closed store refuses from now on are expected, not news.
        journal.stopping = True
        return drained.addCallback(lambda _: journal.store.close())

    def _log_dropped(self, result: Any) -> Any:
        """
        Say, per destination, how many waiting messages this stop loses: those the
        store does not keep (non-persistent ones, or every one without a store).
        Called once the clients are gone, so what they held is back in its queue.
        """
        held = sorted(self.queues.items())
        for (client_id, name), queue in sorted(self.durable.items()):
            held.append((f"{queue.destination} (durable {name!r} of {client_id!r})", queue))
        stored = self.journal is not None
        what, why = ("non-persistent ", "") if stored else ("", " (there is no message store)")
        for destination, queue in held:
            dropped = sum(1 for message in queue.pending if not self._kept(message))
            if queue.paged is not None:
                # On disk, but a restart drops them (transient rows).
                dropped += queue.paged.transient
            if dropped:
                log.warn(
                    "dropped {count} {what}{noun} waiting in {destination} at shutdown{why}",
                    count=dropped,
                    what=what,
                    why=why,
                    noun="message" if dropped == 1 else "messages",
                    destination=destination,
                )
        return result

    def _kept(self, message: Message) -> bool:
        """:returns: whether the store keeps ``message`` across a restart."""
        return message.persistent and self.journal is not None

    # -- routing ---------------------------------------------------------------------

    def publish_queue(self, message: Message) -> None:
        """Put a message sent to a ``/queue/`` on that queue, made on first use."""
        queue = self.queues.get(message.destination)
        if queue is None:
            queue = self.table.queue(message.destination)
        queue.publish(message)

    def publish_stream(self, message: Message) -> Deferred[None] | None:
        """
        Append a message to its stream, counting it in (as a queue counts what it
        takes), and hand it to the readers at its tail.

        :returns: ``None`` without a store, else a Deferred that fires once the
            store has it.
        """
        self.traffic.published(message)
        return self.streams.append(message)

    def stream_reader(self, destination: str, start: StreamStart) -> StreamReader:
        """:returns: a cursor on ``destination``'s stream at ``start``, for one subscription."""
        return self.streams.reader(destination, start)

    def stream_logs(self) -> dict[str, StreamLog]:
        """:returns: the ``/stream/`` destinations known here -> their logs."""
        return self.streams.logs

    def publish_reply(self, message: Message) -> None:
        """
        Put a message sent to a ``/reply-queue/`` on that temporary queue, or drop
        it if the requester has gone (as RabbitMQ does).
        """
        self.table.publish_reply(message)

    def keep(self, message: Message) -> Deferred[None] | None:
        """
        File a persistent message under every key that keeps it, before it is routed.

        The keys are its queue's, or those of the durable subscriptions its topic
        matches now.  The store takes writes in the order they are asked for, so
        the adds come before any delivery mark that routing leads to.  A message
        that has expired already is not filed (routing expires it).

        :returns: the adds' Deferred (see
            :meth:`~stompbroker.broker.store.journal.Journal.add`), or ``None`` if
            nothing keeps the message.
        """
        assert self.journal is not None
        destination = message.destination
        keys: list[str] = []
        if not (message.expires and message.expires <= self.clock.seconds()):
            if destination.startswith(TOPIC_PREFIX):
                for subscriber in self.topics.match(destination):
                    if isinstance(subscriber, WorkerQueue) and subscriber.store_key is not None:
                        keys.append(subscriber.store_key)
            else:
                keys.append(destination)
        return self.journal.add(keys, message)

    def scheduling(self, fire: Callable[[ScheduledEntry[Message]], None]) -> Scheduling:
        """:returns: the timing of this process's scheduled messages, which calls ``fire``."""
        return Scheduling(self.clock, self.scheduled, self.journal, fire)

    def retaining(self) -> Retaining:
        """:returns: what ``retain`` does to this process's retained messages."""
        return Retaining(self.retained, self.journal)

    def retained_copies(self, pattern: str, selector: Any) -> list[Message]:
        """:returns: what a new subscription to ``pattern`` gets first (its topics' retained)."""
        return retained_copies(self.retained, pattern, selector, self.clock.seconds())

    # -- queues ----------------------------------------------------------------------

    def new_queue(self, destination: str, store_key: str | None = None) -> WorkerQueue:
        """
        Make a queue, registered nowhere.

        :param destination: its destination, or a topic subscription's pattern.
        :param store_key: its key in the store, if the store keeps its persistent messages.
        """
        return self.table.new_queue(destination, store_key)

    def queue(self, destination: str) -> WorkerQueue:
        """:returns: the queue of a ``/queue/`` destination, made on first use."""
        queue: WorkerQueue = self.table.queue(destination)
        return queue

    def release_queue(self, queue: WorkerQueue) -> None:
        """
        A consumer has left ``queue``: delete it if it is a ``/queue/`` that holds
        nothing and has no consumers, as queues are made on first use.
        """
        self.table.release(queue)

    def waiting(self, queue: WorkerQueue) -> Waiting | Deferred[Waiting]:
        """
        :returns: the messages waiting in ``queue``, in the order it hands them
            out; a Deferred of them for a paged queue, whose part on disk is read.
        """
        found = queue.browse(queue.depth())
        node = self.ids.node
        if isinstance(found, Deferred):
            return found.addCallback(lambda messages: Waiting(tuple(messages), node))
        return Waiting(tuple(found), node)

    def depth(self, destination: str) -> int:
        """:returns: how many messages wait in the queue of ``destination`` (0 for none)."""
        return self.table.depth(destination)

    def transfer(
        self,
        queue: WorkerQueue,
        count: int,
        route: Callable[[Message], tuple[str, Headers] | None],
        copy: bool = False,
    ) -> Transferred | Deferred[Transferred]:
        """
        Move (or copy) the first ``count`` pending messages of ``queue`` where
        ``route`` says, as new messages (see
        :meth:`IEngine.transfer <stompbroker.broker.engine.engine_interface.IEngine.transfer>`).

        :returns: what went (how many, how many looked at), or a Deferred of it
            for a queue whose part on disk is read.
        """
        return self.table.transfer(queue, count, route, copy, self.keep, self.publish_topic)

    def shared_queues(self) -> None:
        """:returns: ``None``: this process holds every message of its queues."""
        return None

    def nodes(self) -> list[Node]:
        """:returns: this process, the only one sharing this engine's state."""
        return [Node(self.ids.node, True, "local")]

    def share(self, figures: Callable[[], bytes]) -> None:
        """Nothing to share: this process is the whole broker."""

    def share_resumption(self, book: Any) -> None:
        """Nothing to share: a session resumes on this process, the only one."""

    def share_presence(self, presence: Any) -> None:
        """Nothing to share: this process's subscribers are all there are."""

    def share_user_actions(self, apply: Any) -> Any:
        """:returns: a ``tell`` that tells nobody: this process's connections are all there are."""
        return _tell_nobody

    def report_outages(self, alarm: Any) -> None:
        """Nothing to report: the store is in this process."""

    def cluster(self) -> ClusterView | None:
        """:returns: ``None``: this process is the whole broker."""
        return None

    def topic_gaps(self) -> TopicGaps | None:
        """:returns: ``None``: every topic message is sent in this process."""
        return None

    # -- topic subscriptions -------------------------------------------------------------

    def durable_queue(self, durable: tuple[str, str], pattern: str) -> WorkerQueue:
        """
        Find or make the queue of a durable subscription.

        A durable name subscribed again on another pattern starts afresh, as JMS
        does, unless someone is consuming from it now.

        :raises DuplicateSubscription: if it is being consumed on another pattern.
        """
        queue: WorkerQueue | None = reusable_durable(
            self.durable, durable, pattern, self.remove_durable
        )
        if queue is None:
            key = durable_key(durable)
            queue = self.durable[durable] = self.table.new_queue(pattern, key)
            self.topics.add(pattern, queue)
            if self.journal is not None:
                self.journal.add_subscription(key, pattern)
            log.info(
                "created durable subscription {name} on {pattern}", name=durable[1], pattern=pattern
            )
        return queue

    def remove_durable(self, durable: tuple[str, str]) -> Deferred[bool] | None:
        """
        Delete a durable subscription and the messages it has collected.

        :returns: the store's removal (which logs its own failure), or ``None``.
        :raises UnknownSubscription: if there is no such durable subscription.
        """
        queue = self.durable.pop(durable, None)
        if queue is None:
            raise unknown_durable(durable)
        self.topics.remove(queue.destination, queue)
        queue.close()
        removed = None
        if self.journal is not None:
            removed = self.journal.remove_subscription(durable_key(durable))
        log.info(
            "removed durable subscription {name} on {pattern}",
            name=durable[1],
            pattern=queue.destination,
        )
        return removed


def _tell_nobody(action: str, login: str, argument: str) -> None:
    """No other process shares this engine's state."""
