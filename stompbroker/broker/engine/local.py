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
from itertools import islice
from typing import Any

from twisted.internet.defer import Deferred, succeed
from zope.interface import implementer

from stompbroker.broker.engine.base import IEngine, Node
from stompbroker.broker.engine.durable_rules import reusable_durable, unknown_durable
from stompbroker.broker.engine.figures import ClusterView
from stompbroker.broker.features.retained_values import RetainedMessages
from stompbroker.broker.features.scheduled_messages import Scheduler
from stompbroker.broker.features.selecting import SelectingSubscriber
from stompbroker.broker.flow.traffic import TopicTree, Traffic
from stompbroker.broker.queueing.dead_letters import DeadLetters
from stompbroker.broker.queueing.delivery import DeliveryCounters, DeliveryPolicy
from stompbroker.broker.queueing.queues import WorkerQueue
from stompbroker.broker.routing.destinations import QUEUE_PREFIX, TOPIC_PREFIX
from stompbroker.broker.routing.ids import Ids
from stompbroker.broker.store.base import RecoveredState
from stompbroker.broker.store.journal import Journal, durable_key
from stompbroker.broker.store.recovery import rebuild
from stompbroker.broker.streams.offsets import StreamLimits, StreamStart
from stompbroker.broker.streams.reader import StreamReader
from stompbroker.broker.streams.registry import Streams
from stompbroker.broker.streams.sqlite_backend import backend_for
from stompbroker.logs import logger
from stompbroker.protocol.frames import Headers
from stompbroker.protocol.message import Message

log = logger("stompbroker.broker")

DEFAULT_POLICY = DeliveryPolicy()


def _ignore(failure: Any) -> None:
    """Swallow a failure that has been logged where it happened."""


@implementer(IEngine)
class LocalEngine:
    """
    Topics, queues, durable subscriptions and the store of one broker process.

    :param clock: the reactor (or a ``task.Clock``) that times the queues' work.
    :param policy: how messages are delivered, redelivered, dead-lettered and expired.
    :param store: an :class:`~stompbroker.broker.store.base.IMessageStore`, not
        yet open, that keeps persistent messages and durable subscriptions;
        ``None`` keeps everything in memory only.
    :param ids: the broker's :class:`~stompbroker.broker.routing.ids.Ids`; new ones by default.
    :param traffic: the per-destination counters; new ones by default.
    :param counters: the broker-wide counters; new ones by default.

    :ivar topics: the topic subscriptions: direct subscribers, and the queues of
        the others.
    :ivar queues: ``/queue/`` and ``/reply-queue/`` destinations -> their queues.
    :ivar durable: ``(client-id, name)`` -> the queue of that durable subscription.
    :ivar journal: the :class:`~stompbroker.broker.store.journal.Journal` over
        ``store``, or ``None``.
    :ivar dead_letters: where the queues' failed messages go.
    :ivar scheduled: the messages held for later delivery (the broker's
        :class:`~stompbroker.broker.features.scheduler.Scheduling` times them).
    :ivar retained: each topic's retained message.
    """

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
    ) -> None:
        self.clock = clock
        self.policy = policy
        self.store = store
        self.journal = Journal(store) if store is not None else None
        self.persistent = store is not None
        #: Only this process consumes from its queues (see IEngine.shared_queues).
        self.shared_queues = False
        self.ids = ids if ids is not None else Ids()
        self.traffic = traffic if traffic is not None else Traffic()
        self.counters = counters if counters is not None else DeliveryCounters()
        # Selecting subscribers count their own deliveries, as queues do.
        self.topics: TopicTree = TopicTree((WorkerQueue, SelectingSubscriber), self.traffic)
        #: What stands in the tree for a subscriber or queue with a selector.
        self._selecting: dict[Any, SelectingSubscriber] = {}
        self.queues: dict[str, WorkerQueue] = {}
        self.durable: dict[tuple[str, str], WorkerQueue] = {}
        self.scheduled: Scheduler[Message] | None = Scheduler()
        self.retained: RetainedMessages | None = RetainedMessages()
        self.dead_letters = DeadLetters(
            policy, self.counters, self.traffic, self.ids, self.queue, self.journal
        )
        self._dead_letter = self.dead_letters.dead_letter
        self._expired = self.dead_letters.expired
        #: The ``/stream/`` destinations, kept where the store keeps messages.
        self.streams = Streams(clock, stream_limits or StreamLimits(), backend_for(store))

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
        recovered: Deferred[RecoveredState] = self.store.recover()
        # Both reads go to the store at once, in one group of its writer.
        streams = self.streams.recover()

        def failed(failure: Any) -> Any:
            streams.addErrback(_ignore)
            return failure

        return recovered.addCallbacks(self._rebuild, failed).addCallback(lambda _: streams)

    def _rebuild(self, state: RecoveredState) -> None:
        rebuild(self, state)

    def stop(self, drained: Deferred[None]) -> Deferred[None]:
        """
        Close the store once the connections are gone and what they did is written.

        :param drained: fires when the broker's connections are closed.
        :returns: a Deferred that fires once the store is closed.
        """
        self.streams.stop()
        journal = self.journal
        if journal is None:
            return drained
        # Writes the closed store refuses from now on are expected, not news.
        journal.stopping = True
        return drained.addCallback(lambda _: journal.store.close())

    # -- routing ---------------------------------------------------------------------

    def publish_topic(self, message: Message) -> None:
        """
        Deliver a message sent to a topic to every subscription it matches now.

        Counted once per SEND, not per delivery (see :mod:`stompbroker.broker.flow.traffic`).
        A message that has expired already is expired here, not delivered.
        """
        traffic = self.traffic.destinations.get(message.destination)
        if traffic is None:
            traffic = self.traffic.of(message.destination)
        size = len(message.body)
        traffic.messages_in += 1
        traffic.bytes_in += size
        if message.expires and message.expires <= self.clock.seconds():
            self._expired(message)
            return
        topics = self.topics
        matches = topics.match(message.destination)
        for subscriber in matches:
            subscriber.deliver(message)
        direct = topics.direct(matches) if topics.queues else len(matches)
        if direct:
            traffic.messages_delivered += direct
            traffic.messages_acked += direct
            traffic.bytes_out += direct * size
            self.traffic.routed_directly(message.destination, traffic, message)

    def publish_queue(self, message: Message) -> None:
        """Put a message sent to a ``/queue/`` on that queue, made on first use."""
        queue = self.queues.get(message.destination)
        if queue is None:
            queue = self.queue(message.destination)
        queue.publish(message)

    def publish_stream(self, message: Message) -> Deferred[None] | None:
        """
        Append a message to its stream, and hand it to the readers at its tail.

        :returns: ``None`` without a store, else a Deferred that fires once the
            store has it.
        """
        return self.streams.append(message)

    def stream_reader(self, destination: str, start: StreamStart) -> StreamReader:
        """:returns: a cursor on ``destination``'s stream at ``start``, for one subscription."""
        return self.streams.reader(destination, start)

    def publish_reply(self, message: Message) -> None:
        """
        Put a message sent to a ``/reply-queue/`` on that temporary queue, or drop
        it if the requester has gone (as RabbitMQ does).
        """
        queue = self.queues.get(message.destination)
        if queue is None:
            self.counters.discarded += 1
            self.traffic.published(message)
            self.traffic.count((message,), "messages_dropped")
            return
        queue.publish(message)

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

    # -- queues ----------------------------------------------------------------------

    def new_queue(self, destination: str, store_key: str | None = None) -> WorkerQueue:
        """
        Make a queue, registered nowhere.

        :param destination: its destination, or a topic subscription's pattern.
        :param store_key: its key in the store, if the store keeps its persistent messages.
        """
        journal = self.journal if store_key is not None else None
        return WorkerQueue(
            destination,
            self.clock,
            self.policy,
            self.counters,
            self._dead_letter,
            journal=journal,
            store_key=store_key,
            traffic=self.traffic,
        )

    def queue(self, destination: str) -> WorkerQueue:
        """:returns: the queue of a ``/queue/`` destination, made on first use."""
        queue = self.queues.get(destination)
        if queue is None:
            queue = self.queues[destination] = self.new_queue(destination, destination)
        return queue

    def new_reply_queue(self) -> WorkerQueue:
        """:returns: a new temporary queue, under a broker-unique ``/reply-queue/`` name."""
        name = self.ids.new_reply_queue()
        queue = self.queues[name] = self.new_queue(name)
        return queue

    def delete_queue(self, queue: WorkerQueue) -> None:
        """Delete a queue of :attr:`queues` and what it holds (a temporary queue's end)."""
        del self.queues[queue.destination]
        queue.close()

    def release_queue(self, queue: WorkerQueue) -> None:
        """
        A consumer has left ``queue``: delete it if it is a ``/queue/`` that holds
        nothing and has no consumers, as queues are made on first use.
        """
        if queue.is_idle() and queue.destination.startswith(QUEUE_PREFIX):
            self.delete_queue(queue)

    def depth(self, destination: str) -> int:
        """:returns: how many messages wait in the queue of ``destination`` (0 for none)."""
        queue = self.queues.get(destination)
        return 0 if queue is None else len(queue.pending)

    def transfer(
        self,
        queue: WorkerQueue,
        count: int,
        route: Callable[[Message], tuple[str, Headers] | None],
        copy: bool = False,
    ) -> int:
        """
        Move (or copy) the first ``count`` pending messages of ``queue`` where
        ``route`` says, as new messages (see
        :meth:`IEngine.transfer <stompbroker.broker.engine.base.IEngine.transfer>`).

        :returns: how many went.
        """
        chosen = []
        for message in islice(queue.pending, count):
            target = route(message)
            if target is not None:
                chosen.append((message, *target))
        if not copy and chosen:
            gone = {id(message) for message, _, _ in chosen}
            remaining = [message for message in queue.pending if id(message) not in gone]
            queue.pending.clear()
            queue.pending.extend(remaining)
        journal = self.journal
        for message, destination, headers in chosen:
            persistent = message.persistent and journal is not None
            new = Message(
                destination,
                self.ids.new_message_id(),
                headers,
                message.body,
                message.expires,
                0,
                persistent,
                message.priority,
                message.group,
                message.closes_group,
            )
            source_key = None if copy or not persistent else queue.store_key
            written = None
            if destination.startswith(TOPIC_PREFIX):
                if persistent:
                    written = self.keep(new)
                    if source_key is not None:
                        journal.remove(source_key, message.message_id)  # type: ignore[union-attr]
                self.publish_topic(new)
            else:
                if source_key is not None:
                    journal.move(source_key, message.message_id, destination, new)  # type: ignore[union-attr]
                elif persistent:
                    written = journal.add([destination], new)  # type: ignore[union-attr]
                self.queue(destination).publish(new)
            if written is not None:
                # The journal has logged a failure; nobody waits to hear of it.
                written.addErrback(_ignore)
        return len(chosen)

    def nodes(self) -> list[Node]:
        """:returns: this process, the only one sharing this engine's state."""
        return [Node(self.ids.node, True, "local")]

    def share(self, figures: Callable[[], bytes]) -> None:
        """Nothing to share: this process is the whole broker."""

    def share_resumption(self, book: Any) -> None:
        """Nothing to share: a session resumes on this process, the only one."""

    def cluster(self) -> ClusterView | None:
        """:returns: ``None``: this process is the whole broker."""
        return None

    # -- topic subscriptions -------------------------------------------------------------

    def add_subscriber(self, pattern: str, subscriber: Any, selector: Any = None) -> None:
        """
        Deliver what a topic matching ``pattern`` gets to ``subscriber`` directly.

        :param selector: deliver only what this
            :class:`~stompbroker.broker.features.selectors.Selector` selects.
        """
        self.topics.add(pattern, self._selecting_for(subscriber, selector, self.traffic))

    def remove_subscriber(self, pattern: str, subscriber: Any) -> None:
        """Undo :meth:`add_subscriber`; an unknown subscriber is ignored."""
        self.topics.remove(pattern, self._selecting.pop(subscriber, subscriber))

    def subscription_queue(self, pattern: str, selector: Any = None) -> WorkerQueue:
        """
        :param selector: collect only what this
            :class:`~stompbroker.broker.features.selectors.Selector` selects.
        :returns: a new queue that collects what topics matching ``pattern`` get.
        """
        queue = self.new_queue(pattern)
        self.topics.add(pattern, self._selecting_for(queue, selector, None))
        return queue

    def remove_subscription_queue(self, queue: WorkerQueue) -> None:
        """Delete a queue of :meth:`subscription_queue` and what it holds."""
        self.topics.remove(queue.destination, self._selecting.pop(queue, queue))
        queue.close()

    def _selecting_for(self, subscriber: Any, selector: Any, traffic: Traffic | None) -> Any:
        """:returns: what stands in the tree for ``subscriber``: itself without a selector."""
        if selector is None:
            return subscriber
        selecting = self._selecting[subscriber] = SelectingSubscriber(
            subscriber, selector, traffic
        )
        return selecting

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
            queue = self.durable[durable] = self.new_queue(pattern, key)
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
