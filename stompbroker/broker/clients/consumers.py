"""
Subscriptions as consumers: SUBSCRIBE and UNSUBSCRIBE, and the ACKs and NACKs
that settle what was delivered to them.

A subscription is attached by the kind of its destination (see
:mod:`stompbroker.broker.engine.local` for where each takes its messages from):
an ``auto``-ack topic subscription without a durable name goes into the topic
tree as it is; every other one becomes a
:class:`~stompbroker.broker.queueing.delivery.Consumer` of a queue of the engine's, kept
in its connection's state (:mod:`stompbroker.broker.clients.connections`) so that an ACK
finds it.

Settling (ACK, NACK) is a hot path: STOMP 1.2 names the subscription, so an
ACK is two dict lookups, the consumer's ``settle`` and the queue's
``acknowledge``; it returns ``None`` unless the queue wrote to a store, and then
the Deferred that fires once the writes are durable.  In a transaction the
settlement is held until COMMIT (:mod:`stompbroker.broker.clients.transactions`).
"""

from __future__ import annotations

from typing import Any

from twisted.internet.defer import Deferred

from stompbroker.broker.clients.connections import ConnectionRegistry
from stompbroker.broker.clients.transactions import Transactions
from stompbroker.broker.engine.capabilities import require
from stompbroker.broker.features.browsing import browse, check_browser, is_browser
from stompbroker.broker.features.policies import Policies
from stompbroker.broker.features.selecting import subscription_selector
from stompbroker.broker.features.selectors import Selector
from stompbroker.broker.features.user_destinations import UserDestinations
from stompbroker.broker.queueing.backoff import parse_backoff
from stompbroker.broker.queueing.consumer_choice import ConsumerOptions, parse_consumer_options
from stompbroker.broker.queueing.delivery import Consumer, DeliveryPolicy
from stompbroker.broker.queueing.wildcard import WildcardConsumer
from stompbroker.broker.routing.destinations import (
    STREAM_PREFIX,
    TOPIC_PREFIX,
    USER_PREFIX,
    Kind,
    kind_of,
    validate_queue,
    validate_stream,
)
from stompbroker.broker.routing.syntax import is_wildcard, validate_pattern
from stompbroker.broker.store.journal import settled
from stompbroker.broker.streams.offsets import OFFSET_HEADER, parse_start
from stompbroker.protocol.errors import InvalidDestination, InvalidSelector, UnknownAck
from stompbroker.protocol.message import Message


class Consumers:
    """
    Attaches subscribers to the engine's destinations, and settles their messages.

    :param engine: the :class:`~stompbroker.broker.engine.engine_interface.IEngine`.
    :param registry: the connections, whose states keep their consumers.
    :param transactions: holds a transaction's ACKs and NACKs until COMMIT.
    :param policy: the default window and redelivery limit.
    """

    def __init__(
        self,
        engine: Any,
        registry: ConnectionRegistry,
        transactions: Transactions,
        policy: DeliveryPolicy,
        policies: Policies | None = None,
    ) -> None:
        self._engine = engine
        #: Per-destination policies: a subscription's prefetch, redelivery limit and delay.
        self._policies = policies if policies is not None else Policies(policy)
        self._registry = registry
        self._states = registry.states
        self._held_in = transactions.held_in
        self._policy = policy
        self._traffic = engine.bookkeeping().traffic
        self._capabilities = engine.capabilities()
        #: Subscriptions to ``/user/queue/NAME``: a queue each behind their user's key.
        self.users = UserDestinations(engine)

    # -- subscriptions -----------------------------------------------------------------

    def subscribe(self, subscriber: Any) -> None:
        """
        Deliver matching messages to ``subscriber`` from now on.

        :raises InvalidDestination: for a destination the broker does not serve,
            an invalid pattern, or a reply queue.
        :raises DuplicateSubscription: for a durable name in use on another topic.
        :raises InvalidSelector: for a ``selector`` that does not compile, or one
            on a durable subscription.
        :raises MalformedFrame: for bad consumer options (priority, exclusive) or
            a bad browser.
        :raises NotSupported: for what the engine cannot do (the redis engine's
            limits, docs/cluster.md).
        :raises InvalidStreamOffset: for a stream's ``x-stream-offset`` that is
            not one of its values.

        A new topic subscription receives the retained messages of the topics it
        matches first (:mod:`stompbroker.broker.features.retaining`); a durable one when
        it is created, not when it resumes.
        """
        engine = self._engine
        destination = subscriber.destination
        kind = kind_of(destination)
        if is_browser(subscriber):
            self._browse(subscriber, kind)
            return
        selector = subscription_selector(subscriber)
        options = None
        if kind is Kind.TOPIC:
            validate_pattern(destination)
            # Retained messages first, before anything published from now on.
            retained: list[Message] = []
            if self._capabilities.retain and (
                subscriber.durable is None or engine.find_durable(subscriber.durable) is None
            ):
                retained = engine.retained_copies(destination, selector)
            if subscriber.durable is not None:
                queue = engine.durable_queue(subscriber.durable, destination)
            elif subscriber.ack_mode == "auto":
                for message in retained:
                    subscriber.deliver(message)
                engine.add_subscriber(destination, subscriber, selector)
                return
            else:
                queue = engine.subscription_queue(destination, selector)
            for message in retained:
                queue.enqueue(message)
            # The topic tree applies the selector before the queue.
            selector = None
        elif kind is Kind.QUEUE:
            if is_wildcard(destination):
                self._subscribe_wildcard(subscriber, selector)
                return
            validate_queue(destination)
            options = parse_consumer_options(subscriber.headers)
            self._require_shared(options, selector)
            queue = engine.queue(destination)
        elif kind is Kind.TEMP_QUEUE:
            options = parse_consumer_options(subscriber.headers)
            queue = self._registry.temp_queue(subscriber.connection, destination)
        elif kind is Kind.USER:
            options = parse_consumer_options(subscriber.headers)
            queue = self.users.attach(subscriber)
        elif kind is Kind.STREAM:
            validate_stream(destination)
            start = parse_start(subscriber.headers.get(OFFSET_HEADER))
            if selector is not None:
                raise InvalidSelector(
                    "selector on a stream",
                    "a stream subscription reads every message from its offset; selectors"
                    " are for topics and queues",
                )
            queue = engine.stream_reader(destination, start)
        else:
            raise InvalidDestination(
                "cannot subscribe to a reply queue",
                f"{destination!r} delivers to the connection that made it; to get replies,"
                " send with reply-to:/temp-queue/NAME",
            )
        policy = self._policies.delivery(destination) if self._policies else self._policy
        max_redeliveries = subscriber.max_redeliveries
        if max_redeliveries is None:
            max_redeliveries = policy.max_redeliveries
        backoff = parse_backoff(subscriber.headers, policy.backoff)
        state = self._registry.state(subscriber.connection)
        consumer = queue.add_consumer(
            subscriber,
            subscriber.prefetch or policy.prefetch,
            max_redeliveries,
            selector=selector,
            options=None if options is None or options.is_plain else options,
        )
        consumer.backoff = backoff if backoff.delay_ms else None
        state.consumers[subscriber] = consumer

    def _subscribe_wildcard(self, subscriber: Any, selector: Selector | None) -> None:
        """
        Attach a subscriber to every ``/queue/`` its pattern matches, now and later,
        with one window (:mod:`stompbroker.broker.queueing.wildcard`).

        :raises InvalidDestination: for a pattern that is not valid.
        :raises NotSupported: for an engine without ``queue_wildcards``, or what
            :meth:`_require_shared` refuses.
        """
        validate_pattern(subscriber.destination)
        require(self._capabilities, "queue_wildcards")
        options = parse_consumer_options(subscriber.headers)
        self._require_shared(options, selector)
        max_redeliveries = subscriber.max_redeliveries
        if max_redeliveries is None:
            max_redeliveries = self._policy.max_redeliveries
        consumer = WildcardConsumer(
            subscriber,
            subscriber.prefetch or self._policy.prefetch,
            max_redeliveries,
            selector,
            None if options.is_plain else options,
        )
        self._registry.state(subscriber.connection).consumers[subscriber] = consumer
        self._engine.watch_queues(subscriber.destination, consumer)

    def _require_shared(self, options: ConsumerOptions, selector: Selector | None) -> None:
        """
        Refuse what the engine's ``/queue/`` destinations cannot do for a consumer
        (:mod:`~stompbroker.broker.engine.capabilities`).

        :raises NotSupported: for consumer options or a selector it lacks.
        """
        capabilities = self._capabilities
        if options.priority:
            require(capabilities, "consumer_priority")
        if options.exclusive or options.single_active:
            require(capabilities, "exclusive_consumers")
        if selector is not None:
            require(capabilities, "selectors_on_queues")

    def _browse(self, subscriber: Any, kind: Kind) -> None:
        """
        Serve a queue browser (:mod:`stompbroker.broker.features.browsing`): copies of what
        waits, then the end marker; it takes nothing more.
        """
        check_browser(self._engine, subscriber)
        destination = subscriber.destination
        if kind is Kind.QUEUE:
            validate_queue(destination)
            queue = self._engine.queue(destination)
        else:
            queue = self._registry.temp_queue(subscriber.connection, destination)
        browse(self._engine, queue, subscriber)
        # A queue made only to be browsed is forgotten again.
        self._engine.release_queue(queue)

    def unsubscribe(self, subscriber: Any) -> None:
        """
        Stop delivering to ``subscriber``; unknown ones are ignored.

        What it holds unacknowledged goes back to its queue for redelivery; a topic
        subscription's own queue (unless durable) is deleted with what it holds.
        """
        state = self._states.get(subscriber.connection)
        consumer = state.consumers.pop(subscriber, None) if state is not None else None
        destination = subscriber.destination
        if consumer is None:
            if destination.startswith(TOPIC_PREFIX):
                self._engine.remove_subscriber(destination, subscriber)
            return
        if isinstance(consumer, WildcardConsumer):
            self._engine.unwatch_queues(consumer)
            consumer.close(self._engine.release_queue)
            return
        queue = consumer.queue
        if destination.startswith(STREAM_PREFIX):
            queue.remove_consumer(consumer)
            return
        if destination.startswith(TOPIC_PREFIX) and subscriber.durable is None:
            self._engine.remove_subscription_queue(queue)
            return
        if destination.startswith(USER_PREFIX):
            queue.remove_consumer(consumer)
            self.users.detach(queue)
            return
        queue.remove_consumer(consumer)
        self._engine.release_queue(queue)

    # -- acknowledgements ----------------------------------------------------------------

    def ack(
        self,
        connection: Any,
        message_id: str,
        *,
        subscriber: Any = None,
        transaction: str | None = None,
    ) -> Deferred[None] | None:
        """
        Acknowledge a message (and, in ``client`` mode, every earlier one).

        :param connection: the acknowledging connection.
        :param message_id: the ``message-id`` of a message delivered to it.
        :param subscriber: the subscription it was delivered to; ``None`` to look
            through all of the connection's (STOMP 1.0 names no subscription).
        :param transaction: take effect when this transaction commits.
        :returns: ``None``; or, when it settles persistent messages, a Deferred
            that fires once their removal is durable (so that they cannot come
            back after a crash), or has failed (see
            :func:`~stompbroker.broker.store.journal.settled`).
        :raises UnknownAck: if the message is not awaiting acknowledgement there.
        :raises UnknownTransaction: if ``transaction`` is not open.
        """
        if transaction is None and subscriber is not None:
            # The common case (STOMP 1.2 names the subscription), in fewer calls:
            # this runs once per message a client acknowledges.
            state = self._states.get(connection)
            consumer = None if state is None else state.consumers.get(subscriber)
            if consumer is not None:
                found = consumer.settle(message_id)
                if found:
                    written = consumer.queue.acknowledge(consumer, found)
                    return settled(written) if written else None
        consumer = self._holder(connection, message_id, subscriber)
        if transaction is not None:
            self._held_in(connection, transaction).hold(self._acknowledge, consumer, message_id)
            return None
        return self._acknowledge(consumer, message_id)

    def nack(
        self,
        connection: Any,
        message_id: str,
        *,
        subscriber: Any = None,
        requeue: bool = True,
        transaction: str | None = None,
    ) -> Deferred[None] | None:
        """
        Refuse a message (and, in ``client`` mode, every earlier one).

        :param requeue: return it to its queue for redelivery (up to the
            redelivery limit); ``False`` dead-letters it at once.
        :returns: as :meth:`ack`, for the dead-letter moves it makes.
        :raises UnknownAck: if the message is not awaiting acknowledgement there.
        :raises UnknownTransaction: if ``transaction`` is not open.

        The other parameters are those of :meth:`ack`.
        """
        consumer = self._holder(connection, message_id, subscriber)
        if transaction is not None:
            self._held_in(connection, transaction).hold(self._refuse, consumer, message_id, requeue)
            return None
        return self._refuse(consumer, message_id, requeue)

    def _holder(
        self, connection: Any, message_id: str, subscriber: Any
    ) -> Consumer | WildcardConsumer:
        """
        :returns: the consumer of ``connection`` that holds the message unacknowledged.
        :raises UnknownAck: if none does.
        """
        state = self._registry.state(connection)
        if subscriber is not None:
            consumer = state.consumers.get(subscriber)
            if consumer is not None and consumer.holds(message_id):
                return consumer
        else:
            for consumer in state.consumers.values():
                if consumer.holds(message_id):
                    return consumer
        raise UnknownAck(
            "unknown message to acknowledge",
            f"message {message_id!r} is not awaiting acknowledgement on this"
            + (f" subscription {subscriber.subscription_id!r}" if subscriber else " connection")
            + "; it may be acknowledged already, or its subscription may be auto-ack",
        )

    @staticmethod
    def _acknowledge(
        consumer: Consumer | WildcardConsumer, message_id: str
    ) -> Deferred[None] | None:
        found = consumer.settle(message_id)
        if not found:
            return None
        return settled(consumer.queue.acknowledge(consumer, found))

    def _refuse(
        self, consumer: Consumer | WildcardConsumer, message_id: str, requeue: bool
    ) -> Deferred[None] | None:
        found = consumer.settle(message_id)
        if not found:
            return None
        self._traffic.count(found, "messages_nacked")
        if requeue:
            return settled(consumer.queue.requeue(consumer, found))
        return settled(consumer.queue.reject(found))
