"""
The broker: the one service every listener of a process feeds.

:class:`Broker` owns the destinations and the registry of connections.  It never
sees bytes or transports: sessions reach it through
:class:`stompbroker.interfaces.IBroker`, and it reaches them through the
:class:`stompbroker.interfaces.ISubscriber` objects they subscribe with.

Where a subscription takes its messages from:

- an ``auto``-ack topic subscription sits in the :class:`SubscriptionTree`
  itself, and a SEND reaches it with one ``deliver`` call: no queue, no
  bookkeeping (at-most-once);
- every other subscription is a consumer of a
  :class:`~stompbroker.broker.queues.WorkerQueue`: the named queue for
  ``/queue/``, the connection's own for ``/temp-queue/``, and for a topic
  subscription with client acknowledgements or a durable name a queue of its
  own, which sits in the tree in its place and collects what the topic routes
  to it.

Routing a SEND to a topic costs one lookup in the tree (cached per destination)
and one ``deliver`` per matching subscription; nothing on that path logs, raises
or creates a Deferred.
"""

from __future__ import annotations

import itertools
import secrets
from typing import Any, Callable, Iterable, Optional

from attrs import Factory, define, frozen
from twisted.application.service import Service
from twisted.internet.interfaces import IReactorTime
from zope.interface import implementer

from stompbroker.broker.delivery import Consumer, DeliveryCounters, DeliveryPolicy
from stompbroker.broker.destinations import (
    REPLY_QUEUE_PREFIX,
    TEMP_QUEUE_PREFIX,
    TOPIC_PREFIX,
    Kind,
    dead_letter_destination,
    is_dead_letter_queue,
    kind_of,
    validate_queue,
)
from stompbroker.broker.expiry import EXPIRY_HEADERS, expiry_time
from stompbroker.broker.queues import EXPIRED, WorkerQueue
from stompbroker.broker.subscriptions import (
    SubscriptionTree,
    validate_destination,
    validate_pattern,
)
from stompbroker.broker.transactions import TransactionTable
from stompbroker.interfaces import IBroker
from stompbroker.logs import logger
from stompbroker.message import Message
from stompbroker.protocol.errors import (
    DuplicateSubscription,
    InvalidDestination,
    LimitExceeded,
    UnknownAck,
    UnknownSubscription,
    UnknownTransaction,
)
from stompbroker.protocol.frames import Headers

log = logger("stompbroker.broker")

#: SEND headers the broker acts on; a SEND without any of them skips that work.
_ACTED_ON: frozenset[str] = EXPIRY_HEADERS | {"reply-to"}

#: How many destinations' checked kinds :meth:`Broker.send` remembers; like the
#: subscription tree's match cache, it is cleared rather than trimmed when full.
MAX_CHECKED_DESTINATIONS = 4096

#: Headers a dead-lettered message gets, saying where it came from and why.
DEAD_LETTER_HEADERS = ("original-destination", "original-message-id", "dead-letter-reason")


@frozen
class Limits:
    """
    Broker-wide limits.

    :ivar max_connections: most connections open at once; 0 means no limit.
    """

    max_connections: int = 0


@define(eq=False)
class _ConnectionState:
    """
    What the broker keeps for one connection.

    :ivar consumers: subscriber -> its :class:`Consumer`, for every subscription
        that takes from a queue.
    :ivar transactions: the connection's open transactions.
    :ivar temp_queues: ``/temp-queue/NAME`` -> the connection's queue of that name.
    """

    consumers: dict[Any, Consumer] = Factory(dict)
    transactions: TransactionTable = Factory(TransactionTable)
    temp_queues: dict[str, WorkerQueue] = Factory(dict)


@implementer(IBroker)
class Broker(Service):
    """
    A STOMP broker, as a Twisted service.

    :param clock: the reactor (or a ``task.Clock``) that times the broker's work.
    :param limits: broker-wide :class:`Limits`.
    :param policy: how messages are delivered, redelivered, dead-lettered and expired.

    :ivar queues: ``/queue/`` and ``/reply-queue/`` destinations -> their queues.
    :ivar durable: ``(client-id, name)`` -> the queue of that durable subscription.
    :ivar counters: what happened to queued messages, broker-wide.
    """

    name = "broker"

    def __init__(
        self,
        clock: IReactorTime,
        *,
        limits: Limits = Limits(),
        policy: DeliveryPolicy = DeliveryPolicy(),
    ) -> None:
        self.clock = clock
        self.limits = limits
        self.policy = policy
        self.connections: set[Any] = set()
        self.topics: SubscriptionTree[Any] = SubscriptionTree()
        self.queues: dict[str, WorkerQueue] = {}
        self.durable: dict[tuple[str, str], WorkerQueue] = {}
        self.counters = DeliveryCounters()
        self._states: dict[Any, _ConnectionState] = {}
        #: SEND destinations already validated -> their kind.
        self._checked: dict[str, Kind] = {}
        self._node = secrets.token_hex(4)
        self._message_ids = itertools.count(1)
        self._session_ids = itertools.count(1)
        self._temp_ids = itertools.count(1)

    # -- connections -----------------------------------------------------------

    def open_connection(self, connection: Any) -> None:
        """
        Admit a connection.

        :raises LimitExceeded: when ``max_connections`` are already open.
        """
        limit = self.limits.max_connections
        if limit and len(self.connections) >= limit:
            raise LimitExceeded(
                "too many connections",
                f"the broker allows at most {limit} connections (max-connections)",
            )
        self.connections.add(connection)
        self._states[connection] = _ConnectionState()

    def close_connection(self, connection: Any) -> None:
        """
        Forget a connection: abort its open transactions, delete its temporary queues.
        """
        self.connections.discard(connection)
        state = self._states.get(connection)
        if state is None:
            return
        state.transactions.abort_all()
        for subscriber in list(state.consumers):
            self.unsubscribe(subscriber)
        del self._states[connection]
        for queue in state.temp_queues.values():
            del self.queues[queue.destination]
            queue.close()

    def new_session_id(self) -> str:
        """:returns: a broker-unique session id."""
        return f"session-{self._node}-{next(self._session_ids)}"

    def _state(self, connection: Any) -> _ConnectionState:
        state = self._states.get(connection)
        if state is None:
            state = self._states[connection] = _ConnectionState()
        return state

    # -- subscriptions ---------------------------------------------------------

    def subscribe(self, subscriber: Any) -> None:
        """
        Deliver matching messages to ``subscriber`` from now on.

        :raises InvalidDestination: for a destination the broker does not serve,
            a queue destination with a wildcard, or a reply queue.
        :raises DuplicateSubscription: for a durable name in use on another topic.
        """
        destination = subscriber.destination
        kind = kind_of(destination)
        if kind is Kind.TOPIC:
            validate_pattern(destination)
            if subscriber.durable is not None:
                queue = self._durable_queue(subscriber.durable, destination)
            elif subscriber.ack_mode == "auto":
                self.topics.add(destination, subscriber)
                return
            else:
                queue = self._new_queue(destination)
                self.topics.add(destination, queue)
        elif kind is Kind.QUEUE:
            validate_queue(destination)
            queue = self._shared_queue(destination)
        elif kind is Kind.TEMP_QUEUE:
            queue = self._temp_queue(subscriber.connection, destination)
        else:
            raise InvalidDestination(
                "cannot subscribe to a reply queue",
                f"{destination!r} delivers to the connection that made it; to get replies,"
                " send with reply-to:/temp-queue/NAME",
            )
        max_redeliveries = subscriber.max_redeliveries
        if max_redeliveries is None:
            max_redeliveries = self.policy.max_redeliveries
        state = self._state(subscriber.connection)
        state.consumers[subscriber] = queue.add_consumer(
            subscriber, subscriber.prefetch or self.policy.prefetch, max_redeliveries
        )

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
                self.topics.remove(destination, subscriber)
            return
        queue = consumer.queue
        if kind_of(destination) is Kind.TOPIC and subscriber.durable is None:
            self.topics.remove(destination, queue)
            queue.close()
            return
        queue.remove_consumer(consumer)
        if queue.is_idle() and kind_of(queue.destination) is Kind.QUEUE:
            # Queues are created on first use, so an idle one can go and come back.
            del self.queues[queue.destination]
            queue.close()

    def remove_durable(self, durable: tuple[str, str]) -> None:
        """
        Delete a durable subscription and the messages it has collected.

        :param durable: ``(client-id, name)``, as in ``ISubscriber.durable``.
        :raises UnknownSubscription: if there is no such durable subscription.
        """
        queue = self.durable.pop(durable, None)
        if queue is None:
            raise UnknownSubscription(
                "unknown durable subscription",
                f"there is no durable subscription named {durable[1]!r}"
                + (f" for client-id {durable[0]!r}" if durable[0] else ""),
            )
        self.topics.remove(queue.destination, queue)
        queue.close()
        log.info(
            "removed durable subscription {name} on {pattern}",
            name=durable[1],
            pattern=queue.destination,
        )

    def _durable_queue(self, durable: tuple[str, str], pattern: str) -> WorkerQueue:
        """
        Find or make the queue of a durable subscription.

        A durable name subscribed again on another pattern starts afresh, as JMS
        does, unless someone is consuming from it now.
        """
        queue = self.durable.get(durable)
        if queue is not None and queue.destination != pattern:
            if queue.consumers:
                raise DuplicateSubscription(
                    "durable subscription in use",
                    f"the durable subscription {durable[1]!r} is being consumed on"
                    f" {queue.destination!r}; it cannot move to {pattern!r} now",
                )
            self.remove_durable(durable)
            queue = None
        if queue is None:
            queue = self.durable[durable] = self._new_queue(pattern)
            self.topics.add(pattern, queue)
            log.info(
                "created durable subscription {name} on {pattern}", name=durable[1], pattern=pattern
            )
        return queue

    # -- queues ----------------------------------------------------------------

    def _new_queue(self, destination: str) -> WorkerQueue:
        return WorkerQueue(destination, self.clock, self.policy, self.counters, self._dead_letter)

    def _shared_queue(self, destination: str) -> WorkerQueue:
        """:returns: the queue of a ``/queue/`` destination, made on first use."""
        queue = self.queues.get(destination)
        if queue is None:
            queue = self.queues[destination] = self._new_queue(destination)
        return queue

    def _temp_queue(self, connection: Any, destination: str) -> WorkerQueue:
        """
        :param destination: ``/temp-queue/NAME``.
        :returns: the connection's temporary queue of that name, made on first use
            under a broker-unique ``/reply-queue/`` destination.
        """
        if connection is None:
            raise InvalidDestination(
                "temporary queue without a connection",
                f"{destination!r} belongs to a client connection; publish to /queue/ instead",
            )
        validate_queue(destination)
        state = self._state(connection)
        queue = state.temp_queues.get(destination)
        if queue is None:
            name = f"{REPLY_QUEUE_PREFIX}tmp-{self._node}-{next(self._temp_ids)}"
            queue = self.queues[name] = self._new_queue(name)
            state.temp_queues[destination] = queue
        return queue

    def _dead_letter(self, message: Message, reason: str) -> None:
        """
        Move a message to the dead-letter queue of the destination it was sent to.

        A message that fails in a dead-letter queue is discarded, not dead-lettered
        again, so that nothing circulates for ever.
        """
        prefix = self.policy.dead_letter_prefix
        if is_dead_letter_queue(message.destination, prefix):
            self.counters.discarded += 1
            return
        target = dead_letter_destination(message.destination, prefix)
        headers = tuple(pair for pair in message.headers if pair[0] not in DEAD_LETTER_HEADERS)
        headers += (
            ("original-destination", message.destination),
            ("original-message-id", message.message_id),
            ("dead-letter-reason", reason),
        )
        self.counters.dead_lettered += 1
        log.debug(
            "dead-lettered {message_id} from {origin} to {target}: {reason}",
            message_id=message.message_id,
            origin=message.destination,
            target=target,
            reason=reason,
        )
        self._shared_queue(target).enqueue(
            Message(target, self._new_message_id(), headers, message.body)
        )

    # -- publishing ------------------------------------------------------------

    def send(
        self,
        destination: str,
        headers: Headers,
        body: bytes,
        *,
        connection: Any = None,
        transaction: Optional[str] = None,
    ) -> Message:
        """
        Route one message: to every matching topic subscription, or onto a queue.

        :param connection: the sending connection, which owns its ``/temp-queue/``
            destinations and transactions; ``None`` for a message from Python code.
        :param transaction: hold the message until this transaction commits.
        :raises InvalidDestination: for a wildcard or an unknown kind of destination.
        :raises MalformedFrame: for an ``expires`` or ``expiration`` header that is
            not a number of milliseconds.
        :raises UnknownTransaction: if ``transaction`` is not open on ``connection``.
        """
        kind = self._checked.get(destination)
        if kind is None:
            kind = self._check(destination)
        route: Callable[[Message], None]
        if kind is Kind.TOPIC:
            route = self._publish_topic
        elif kind is Kind.QUEUE:
            route = self._publish_queue
        elif kind is Kind.TEMP_QUEUE:
            route = self._temp_queue(connection, destination).enqueue
        else:
            route = self._publish_reply
        held = None
        if transaction is not None:
            held = self._transactions(connection).get(transaction)
        headers, expires = self._prepare(headers, connection)
        message = Message(
            destination, f"{self._node}-{next(self._message_ids)}", headers, body, expires
        )
        if held is not None:
            held.hold(route, message)
        else:
            route(message)
        return message

    def _check(self, destination: str) -> Kind:
        """
        Validate a SEND destination once, and remember its kind.

        :raises InvalidDestination: for a wildcard or an unknown kind of destination.
        """
        kind = kind_of(destination)
        if kind is Kind.TOPIC:
            validate_destination(destination)
        else:
            validate_queue(destination)
        if len(self._checked) >= MAX_CHECKED_DESTINATIONS:
            self._checked.clear()
        self._checked[destination] = kind
        return kind

    def _new_message_id(self) -> str:
        return f"{self._node}-{next(self._message_ids)}"

    def _prepare(self, headers: Headers, connection: Any) -> tuple[Headers, float]:
        """
        Read a SEND's expiry and rewrite its temporary ``reply-to``.

        :returns: the headers to deliver, and the expiry in clock seconds (0 for never).
        """
        ttl = self.policy.ttl
        for name, _ in headers:
            if name in _ACTED_ON:
                break
        else:
            if ttl:
                return headers, self.clock.seconds() + ttl / 1000.0
            return headers, 0.0
        found: dict[str, str] = {}
        rewritten = []
        for name, value in headers:
            if name in _ACTED_ON and name not in found:
                found[name] = value
                if (
                    name == "reply-to"
                    and value.startswith(TEMP_QUEUE_PREFIX)
                    and connection is not None
                ):
                    value = self._temp_queue(connection, value).destination
            rewritten.append((name, value))
        expires = expiry_time(
            found.get("expires"), found.get("expiration"), self.clock.seconds(), ttl
        )
        return tuple(rewritten), expires

    def _publish_topic(self, message: Message) -> None:
        if message.expires and message.expires <= self.clock.seconds():
            self._expired(message)
            return
        for subscriber in self.topics.match(message.destination):
            subscriber.deliver(message)

    def _publish_queue(self, message: Message) -> None:
        self._shared_queue(message.destination).enqueue(message)

    def _publish_reply(self, message: Message) -> None:
        queue = self.queues.get(message.destination)
        if queue is None:
            # The requester has gone: its replies have nowhere to go (as in RabbitMQ).
            self.counters.discarded += 1
            return
        queue.enqueue(message)

    def _expired(self, message: Message) -> None:
        """Count a message that expired before any queue took it; drop or dead-letter it."""
        self.counters.expired += 1
        if self.policy.expired == "dead-letter":
            self._dead_letter(message, EXPIRED)

    def publish(
        self,
        destination: str,
        body: bytes | str,
        headers: Optional[Iterable[tuple[str, str]]] = None,
    ) -> Message:
        """
        Publish a message from Python code in the broker's process.

        This is the embedding API: no client connection is involved, and the
        message is routed exactly as a SEND from a client would be.

        :param destination: e.g. ``/topic/prices`` or ``/queue/jobs``.
        :param body: the payload; text is encoded as UTF-8 and gets a
            ``content-type`` of ``text/plain;charset=utf-8`` unless one is given.
        :param headers: extra ``(name, value)`` headers for subscribers.
        :returns: the routed message.
        """
        pairs = list(headers or ())
        if isinstance(body, str):
            body = body.encode("utf-8")
            if not any(name == "content-type" for name, _ in pairs):
                pairs.append(("content-type", "text/plain;charset=utf-8"))
        return self.send(destination, tuple(pairs), body)

    # -- acknowledgements ------------------------------------------------------

    def ack(
        self,
        connection: Any,
        message_id: str,
        *,
        subscriber: Any = None,
        transaction: Optional[str] = None,
    ) -> None:
        """
        Acknowledge a message (and, in ``client`` mode, every earlier one).

        :param connection: the acknowledging connection.
        :param message_id: the ``message-id`` of a message delivered to it.
        :param subscriber: the subscription it was delivered to; ``None`` to look
            through all of the connection's (STOMP 1.0 names no subscription).
        :param transaction: take effect when this transaction commits.
        :raises UnknownAck: if the message is not awaiting acknowledgement there.
        :raises UnknownTransaction: if ``transaction`` is not open.
        """
        consumer = self._holder(connection, message_id, subscriber)
        if transaction is not None:
            self._transactions(connection).get(transaction).hold(
                self._acknowledge, consumer, message_id
            )
        else:
            self._acknowledge(consumer, message_id)

    def nack(
        self,
        connection: Any,
        message_id: str,
        *,
        subscriber: Any = None,
        requeue: bool = True,
        transaction: Optional[str] = None,
    ) -> None:
        """
        Refuse a message (and, in ``client`` mode, every earlier one).

        :param requeue: return it to its queue for redelivery (up to the
            redelivery limit); ``False`` dead-letters it at once.
        :raises UnknownAck: if the message is not awaiting acknowledgement there.
        :raises UnknownTransaction: if ``transaction`` is not open.

        The other parameters are those of :meth:`ack`.
        """
        consumer = self._holder(connection, message_id, subscriber)
        if transaction is not None:
            self._transactions(connection).get(transaction).hold(
                self._refuse, consumer, message_id, requeue
            )
        else:
            self._refuse(consumer, message_id, requeue)

    def _holder(self, connection: Any, message_id: str, subscriber: Any) -> Consumer:
        """
        :returns: the consumer of ``connection`` that holds the message unacknowledged.
        :raises UnknownAck: if none does.
        """
        state = self._state(connection)
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
    def _acknowledge(consumer: Consumer, message_id: str) -> None:
        settled = consumer.settle(message_id)
        if settled:
            consumer.queue.acknowledge(consumer, settled)

    @staticmethod
    def _refuse(consumer: Consumer, message_id: str, requeue: bool) -> None:
        settled = consumer.settle(message_id)
        if not settled:
            return
        if requeue:
            consumer.queue.requeue(consumer, settled)
        else:
            consumer.queue.reject(settled)

    # -- transactions ------------------------------------------------------------

    def _transactions(self, connection: Any) -> TransactionTable:
        if connection is None:
            raise UnknownTransaction(
                "unknown transaction", "transactions belong to client connections"
            )
        return self._state(connection).transactions

    def begin(self, connection: Any, transaction: str) -> None:
        """
        Open a transaction on a connection.

        :raises DuplicateTransaction: if one of that id is open there already.
        """
        self._transactions(connection).begin(transaction)

    def commit(self, connection: Any, transaction: str) -> None:
        """
        Perform, in order and at once, the SENDs, ACKs and NACKs a transaction holds.

        :raises UnknownTransaction: if it is not open.
        """
        self._transactions(connection).commit(transaction)

    def abort(self, connection: Any, transaction: str) -> None:
        """
        Discard what a transaction holds; messages it acknowledged stay unacknowledged.

        :raises UnknownTransaction: if it is not open.
        """
        self._transactions(connection).abort(transaction)
