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

Persistent messages (see :mod:`stompbroker.broker.persistence`): with a message
store, a ``persistent:true`` SEND to a queue (every queue SEND with
``persistent_queues``), or to a topic with durable subscriptions, is filed in the
store under each key that keeps it and enqueued in memory at once;
:meth:`Broker.send` returns the Deferred of those writes, on which the session
holds the RECEIPT.  Every other SEND returns ``None``.  At start
(:meth:`Broker.startService`) the broker rebuilds its queues and durable
subscriptions from the store; :meth:`Broker.when_ready` says when that is done,
and only then should clients be let in.
"""

from __future__ import annotations

import itertools
import secrets
from collections.abc import Callable, Iterable
from typing import Any

from attrs import Factory, define, field, frozen
from twisted.application.service import Service
from twisted.internet.defer import Deferred, succeed
from twisted.internet.interfaces import IReactorTime
from twisted.python.failure import Failure
from zope.interface import implementer

from stompbroker.broker.delivery import Consumer, DeliveryCounters, DeliveryPolicy
from stompbroker.broker.destinations import (
    QUEUE_PREFIX,
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
from stompbroker.broker.flow import MEMORY, MemoryWatch, Throttle, memory_gauge, physical_memory
from stompbroker.broker.persistence import (
    Journal,
    all_done,
    durable_key,
    parse_durable_key,
    settled,
)
from stompbroker.broker.queues import EXPIRED, WorkerQueue
from stompbroker.broker.store.base import RecoveredState, StoredMessage
from stompbroker.broker.subscriptions import validate_destination, validate_pattern
from stompbroker.broker.traffic import TopicTree, Traffic
from stompbroker.broker.transactions import Transaction, TransactionTable
from stompbroker.interfaces import IBroker
from stompbroker.logs import logger
from stompbroker.protocol.errors import (
    DuplicateSubscription,
    InvalidDestination,
    LimitExceeded,
    ShuttingDown,
    UnknownAck,
    UnknownSubscription,
    UnknownTransaction,
)
from stompbroker.protocol.frames import Headers
from stompbroker.protocol.message import Message

log = logger("stompbroker.broker")

#: SEND headers the broker acts on; a SEND without any of them skips that work.
_ACTED_ON: frozenset[str] = EXPIRY_HEADERS | {"reply-to"}
#: ... and with a message store, ``persistent`` too.
_ACTED_ON_WITH_STORE: frozenset[str] = _ACTED_ON | {"persistent"}

#: How many destinations' checked kinds :meth:`Broker.send` remembers; like the
#: subscription tree's match cache, it is cleared rather than trimmed when full.
MAX_CHECKED_DESTINATIONS = 4096

#: Headers a dead-lettered message gets, saying where it came from and why.
DEAD_LETTER_HEADERS = ("original-destination", "original-message-id", "dead-letter-reason")


#: The default high memory mark, as a share of the machine's memory.
MEMORY_HIGH_SHARE = 0.4
#: The default low memory mark, as a share of the high one.
MEMORY_LOW_SHARE = 0.8


def _default_memory_high() -> int:
    return int(physical_memory() * MEMORY_HIGH_SHARE)


def _host_of(connection: Any) -> str:
    """:returns: the host part of a connection's ``peer`` (``HOST:PORT``)."""
    peer: str = connection.peer
    host, colon, _ = peer.rpartition(":")
    return host if colon else peer


@frozen
class Limits:
    """
    Broker-wide limits, with defaults that protect a small machine; each is a twistd option.

    :ivar max_connections: most connections open at once; 0 means no limit.
    :ivar max_connections_per_address: most connections open at once from one
        client address (the host, without the port); 0 means no limit.
    :ivar max_transactions: most transactions one connection may have open; 0
        means no limit.
    :ivar max_transaction_frames: most SEND, ACK and NACK frames one transaction
        may hold; 0 means no limit.
    :ivar memory_high: bytes of memory in use (see :mod:`stompbroker.broker.flow`)
        above which the broker stops reading from connections that publish; 0
        turns the watermark off.  Defaults to 40% of the machine's memory.
    :ivar memory_low: bytes below which it reads from them again; 0 means 80% of
        ``memory_high``.
    :ivar shutdown_timeout: most seconds a graceful stop waits for clients to
        take their last frames before it drops them.
    """

    max_connections: int = 10000
    max_connections_per_address: int = 0
    max_transactions: int = 100
    max_transaction_frames: int = 10000
    memory_high: int = field(factory=_default_memory_high)
    memory_low: int = 0
    shutdown_timeout: float = 10.0

    @property
    def memory_low_mark(self) -> int:
        """:returns: the low memory mark in bytes, the default applied."""
        return self.memory_low or int(self.memory_high * MEMORY_LOW_SHARE)


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
    :param store: an open :class:`~stompbroker.broker.store.base.IMessageStore` that
        keeps persistent messages and durable subscriptions, and from which
        :meth:`startService` recovers them; ``None`` keeps every message in
        memory only, and ignores ``persistent`` headers.
    :param persistent_queues: with a store, treat every SEND to a ``/queue/`` as
        persistent, whatever its ``persistent`` header says.

    :ivar queues: ``/queue/`` and ``/reply-queue/`` destinations -> their queues.
    :ivar durable: ``(client-id, name)`` -> the queue of that durable subscription.
    :ivar counters: what happened to queued messages, broker-wide.
    :ivar journal: the :class:`~stompbroker.broker.persistence.Journal` over
        ``store``, or ``None``.
    """

    name = "broker"

    def __init__(
        self,
        clock: IReactorTime,
        *,
        limits: Limits = Limits(),
        policy: DeliveryPolicy = DeliveryPolicy(),
        store: Any = None,
        persistent_queues: bool = False,
    ) -> None:
        self.clock = clock
        self.limits = limits
        self.policy = policy
        self.store = store
        self.journal = Journal(store) if store is not None else None
        self.persistent_queues = persistent_queues and store is not None
        self._acted_on = _ACTED_ON_WITH_STORE if store is not None else _ACTED_ON
        #: How recovery ended: ``None`` until it has, then ``True`` or its Failure.
        self._recovery: bool | Failure | None = None
        self._ready_waiters: list[Deferred[None]] = []
        self.connections: set[Any] = set()
        #: What routing counts, per destination, for statistics (see stompbroker.stats.model).
        self.traffic = Traffic()
        self.topics: TopicTree = TopicTree(WorkerQueue, self.traffic)
        self.queues: dict[str, WorkerQueue] = {}
        self.durable: dict[tuple[str, str], WorkerQueue] = {}
        self.counters = DeliveryCounters()
        #: Publishers whose reading is paused, and why (memory, slow subscribers).
        self.throttle = Throttle()
        #: Measures the memory in use for the watermark; tests replace it.
        self.memory_gauge, self.memory_gauge_kind = memory_gauge()
        self._memory_watch: MemoryWatch | None = None
        #: Whether the SEND being routed must pause its sender (see :meth:`send`).
        self._pausing = False
        #: Connections per client host, for ``max_connections_per_address``.
        self._per_host: dict[str, int] = {}
        #: Slow subscribers that the message being routed reached under ``block``.
        self._blocked_by: list[Any] = []
        #: Slow subscribers dropping messages now, so that each episode is logged once.
        self._dropping: set[Any] = set()
        self._stopping = False
        self._states: dict[Any, _ConnectionState] = {}
        #: SEND destinations already validated -> their kind.
        self._checked: dict[str, Kind] = {}
        self._node = secrets.token_hex(4)
        self._message_ids = itertools.count(1)
        self._session_ids = itertools.count(1)
        self._temp_ids = itertools.count(1)

    # -- life cycle: recovery from the message store ----------------------------

    def startService(self) -> None:
        """
        Start: open the store, if there is one, and rebuild queues and durable
        subscriptions from it.

        Opening is synchronous, so that a store that cannot be used stops the
        start; recovery is not (the store reads in its writer thread): let
        clients in once :meth:`when_ready` fires.  The memory watermark starts
        watching too.

        :raises stompbroker.broker.store.base.StoreError: if the store cannot be
            opened (locked, damaged, unavailable); the broker is then not running.
        """
        if self.store is not None:
            self.store.open()
        super().startService()
        self._stopping = False
        self._watch_memory()
        if self.store is None:
            self._recovery_ended(None)
            return
        self.store.recover().addCallback(self._recover).addBoth(self._recovery_ended)

    def stopService(self) -> Deferred[None] | None:
        """
        Stop gracefully: shut every client connection down (see
        :meth:`_shut_down_connections`), and close the store once everything
        written before is durable.

        :returns: a Deferred that fires when both are done.
        """
        super().stopService()
        drained = self._shut_down_connections()
        if self.journal is None:
            return drained
        journal = self.journal
        journal.stopping = True
        # What the clients did while they were being shut down gets stored too.
        return drained.addCallback(lambda _: journal.store.close())

    def _shut_down_connections(self) -> Deferred[None]:
        """
        Refuse new connections, and tell every client that the broker is shutting down.

        Each connection gets an ERROR and closes once what was written to it is
        flushed.

        :returns: a Deferred that fires when they all have closed, or after
            ``shutdown_timeout`` seconds, whichever comes first: connections still
            open then are dropped when the reactor stops.
        """
        self._stopping = True
        if self._memory_watch is not None:
            self._memory_watch.stop()
            self._memory_watch = None
        closing = set(self.connections)
        if not closing:
            return succeed(None)
        drained: Deferred[None] = Deferred()
        log.info(
            "shutting down: telling {count} clients, waiting at most {timeout} s",
            count=len(closing),
            timeout=self.limits.shutdown_timeout,
        )

        def give_up() -> None:
            log.warn(
                "shutting down: {count} connections did not close within {timeout} s",
                count=len(closing),
                timeout=self.limits.shutdown_timeout,
            )
            drained.callback(None)

        deadline = self.clock.callLater(self.limits.shutdown_timeout, give_up)

        def closed(connection: Any) -> None:
            closing.discard(connection)
            if not closing and deadline.active():
                deadline.cancel()
                drained.callback(None)

        for connection in list(closing):
            connection.shut_down(closed)
        return drained

    def _watch_memory(self) -> None:
        """Start the memory watermark, unless it is off or memory cannot be measured here."""
        high = self.limits.memory_high
        if not high or self._memory_watch is not None:
            return
        if self.memory_gauge is None:
            log.warn("memory watermark off: memory in use cannot be measured on this system")
            return
        self._memory_watch = MemoryWatch(
            self.clock,
            self.memory_gauge,
            high,
            self.limits.memory_low_mark,
            self._memory_high,
            self._memory_low,
        )
        self._memory_watch.start()

    def when_ready(self) -> Deferred[None]:
        """
        :returns: a Deferred that fires once :meth:`startService` has rebuilt
            everything the store holds, or fails with what stopped it (a
            :class:`~stompbroker.broker.store.base.StoreError`, say); let clients in
            only after it fires.
        """
        waiter: Deferred[None] = Deferred()
        if self._recovery is None:
            self._ready_waiters.append(waiter)
        elif isinstance(self._recovery, Failure):
            waiter.errback(self._recovery)
        else:
            waiter.callback(None)
        return waiter

    def _recovery_ended(self, outcome: Any) -> None:
        """Remember how recovery ended, and tell whoever waits in :meth:`when_ready`."""
        if isinstance(outcome, Failure):
            log.critical(
                "cannot recover persistent messages from the message store: {error}",
                error=str(outcome.value),
            )
            self._recovery = outcome
        else:
            self._recovery = True
        waiters, self._ready_waiters = self._ready_waiters, []
        for waiter in waiters:
            if isinstance(outcome, Failure):
                waiter.errback(outcome)
            else:
                waiter.callback(None)

    def _recover(self, state: RecoveredState) -> None:
        """
        Refill queues and rebuild durable subscriptions from what the store holds.

        Each queue gets its messages back in their original order, without writing
        them again; one that had been delivered comes back with its delivery count,
        so its next delivery says ``redelivered:true``.  Messages that expired
        while the broker was down are expired (dropped or dead-lettered, through
        the store) once everything is back, so that a dead-letter queue gets them
        after what it held already.
        """
        expired: list[tuple[WorkerQueue, Message]] = []
        restored = 0
        for subscription in state.subscriptions:
            durable = parse_durable_key(subscription.name)
            if durable is None:
                log.warn(
                    "ignoring stored subscription {name}: not a durable subscription key",
                    name=subscription.name,
                )
                continue
            queue = self._new_queue(subscription.destination, subscription.name)
            self.durable[durable] = queue
            self.topics.add(subscription.destination, queue)
            restored += self._refill(queue, state.backlogs.get(subscription.name, ()), expired)
        for key, records in state.queues.items():
            if not key.startswith(QUEUE_PREFIX):
                log.warn(
                    "ignoring {count} stored messages under {key}: no queue or durable"
                    " subscription has that key",
                    count=len(records),
                    key=key,
                )
                continue
            restored += self._refill(self._shared_queue(key), records, expired)
        for queue, message in expired:
            queue.expire(message)
        log.info(
            "recovered {messages} persistent messages ({expired} expired) in {queues}"
            " queues and {subscriptions} durable subscriptions",
            messages=restored,
            expired=len(expired),
            queues=len(state.queues),
            subscriptions=len(self.durable),
        )

    def _refill(
        self,
        queue: WorkerQueue,
        records: Iterable[StoredMessage],
        expired: list[tuple[WorkerQueue, Message]],
    ) -> int:
        """
        Enqueue stored messages again, in order, and collect those that have expired.

        :returns: how many records there were.
        """
        now = self.clock.seconds()
        count = 0
        for record in records:
            count += 1
            message = Message(
                record.destination,
                record.message_id,
                record.headers,
                record.body,
                record.expires,
                record.redeliveries,
                True,
            )
            if message.expires and message.expires <= now:
                expired.append((queue, message))
            else:
                queue.enqueue(message)
        return count

    # -- connections -----------------------------------------------------------

    def open_connection(self, connection: Any) -> None:
        """
        Admit a connection.

        :raises LimitExceeded: when ``max_connections`` are already open, or
            ``max_connections_per_address`` from the connection's host.
        :raises ShuttingDown: once the broker is stopping.
        """
        if self._stopping:
            raise ShuttingDown(
                "broker shutting down", "the broker is stopping and takes no new connections"
            )
        limit = self.limits.max_connections
        if limit and len(self.connections) >= limit:
            raise LimitExceeded(
                "too many connections",
                f"the broker allows at most {limit} connections (max-connections)",
            )
        host = _host_of(connection)
        per_host = self.limits.max_connections_per_address
        if per_host and self._per_host.get(host, 0) >= per_host:
            raise LimitExceeded(
                "too many connections from this address",
                f"the broker allows at most {per_host} connections from one address"
                " (max-connections-per-address)",
            )
        self._per_host[host] = self._per_host.get(host, 0) + 1
        self.connections.add(connection)
        self.traffic.connections_opened += 1
        self._states[connection] = _ConnectionState()

    def close_connection(self, connection: Any) -> None:
        """
        Forget a connection: abort its open transactions, delete its temporary queues.
        """
        if connection in self.connections:
            self.connections.discard(connection)
            self.traffic.connections_closed += 1
            host = _host_of(connection)
            remaining = self._per_host[host] - 1
            if remaining:
                self._per_host[host] = remaining
            else:
                del self._per_host[host]
        self.throttle.forget(connection)
        self._dropping.discard(connection)
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

    # -- flow control --------------------------------------------------------------

    def pause_consumers(self, connection: Any) -> None:
        """
        A connection's socket has fallen behind: give its queue consumers nothing more.

        Their messages wait in their queues (:meth:`Consumer.has_room`) until
        :meth:`resume_consumers`.
        """
        state = self._states.get(connection)
        if state is not None:
            for consumer in state.consumers.values():
                consumer.paused = True

    def resume_consumers(self, connection: Any) -> None:
        """
        A connection's socket has caught up: its queue consumers get messages again.

        Its blocked publishers go on too, and a drop episode ends (see :meth:`block_sender`).
        """
        if connection in self._dropping:
            self._dropping.discard(connection)
            log.info("slow consumer {peer} caught up", peer=connection.peer)
        self.throttle.release(connection)
        state = self._states.get(connection)
        if state is None:
            return
        consumers = list(state.consumers.values())
        for consumer in consumers:
            consumer.paused = False
        for consumer in consumers:
            if consumer.paused:
                # Handing out messages filled the socket's buffer again.
                break
            consumer.queue.dispatch()

    def block_sender(self, subscriber: Any) -> None:
        """
        Pause the publisher of the message being routed until ``subscriber`` catches up.

        Called by a slow subscriber's connection under the ``block`` policy for
        each message it takes over its buffer limit.  The publisher is paused
        once its SEND (or COMMIT) has been routed, and resumes when every
        connection it waits for has called :meth:`resume_consumers` or closed.

        :param subscriber: the slow subscriber's connection.
        """
        self._blocked_by.append(subscriber)
        self._pausing = True

    def count_dropped(self, connection: Any, count: int, disconnected: bool = False) -> None:
        """
        Count topic messages a slow subscriber will never get.

        :param connection: the slow subscriber's connection.
        :param count: how many were dropped.
        :param disconnected: whether the connection is being closed for being slow.
        """
        self.counters.dropped += count
        if disconnected:
            self.counters.slow_disconnects += 1
            # What still comes for it until it is closed is counted, not logged.
            self._dropping.add(connection)
            log.warn(
                "disconnecting slow consumer {peer}: its buffer is full;"
                " {count} messages dropped with it",
                peer=connection.peer,
                count=count,
            )
        elif connection not in self._dropping:
            self._dropping.add(connection)
            log.warn("slow consumer {peer}: dropping its oldest messages", peer=connection.peer)

    def _pause_sender(self, connection: Any) -> None:
        """
        Pause reading from ``connection``, whose SEND (or COMMIT) was just routed:
        memory is over the high mark, or its message reached subscribers that block.
        """
        blocked_by, self._blocked_by = self._blocked_by, []
        memory = self._memory_watch is not None and self._memory_watch.over
        self._pausing = memory
        if connection is None or connection not in self.connections:
            # Python code published it, or the sender is closing already.
            return
        for subscriber in blocked_by:
            if subscriber in self.connections:
                self.throttle.hold(connection, subscriber)
        if memory:
            self.throttle.hold(connection, MEMORY)

    def _memory_high(self, used: int) -> None:
        log.warn(
            "memory in use {used} bytes is over the high mark {high}: pausing publishers",
            used=used,
            high=self.limits.memory_high,
        )
        self._pausing = True

    def _memory_low(self, used: int) -> None:
        log.info(
            "memory in use {used} bytes is under the low mark {low}: resuming {count} publishers",
            used=used,
            low=self.limits.memory_low_mark,
            count=len(self.throttle),
        )
        self._pausing = bool(self._blocked_by)
        self.throttle.release(MEMORY)

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
        if self.journal is not None:
            self.journal.remove_subscription(durable_key(durable))
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
            key = durable_key(durable)
            queue = self.durable[durable] = self._new_queue(pattern, key)
            self.topics.add(pattern, queue)
            if self.journal is not None:
                self.journal.add_subscription(key, pattern)
            log.info(
                "created durable subscription {name} on {pattern}", name=durable[1], pattern=pattern
            )
        return queue

    # -- queues ----------------------------------------------------------------

    def _new_queue(self, destination: str, store_key: str | None = None) -> WorkerQueue:
        """
        :param store_key: the queue's key in the store, if the store keeps its
            persistent messages.
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

    def _shared_queue(self, destination: str) -> WorkerQueue:
        """:returns: the queue of a ``/queue/`` destination, made on first use."""
        queue = self.queues.get(destination)
        if queue is None:
            queue = self.queues[destination] = self._new_queue(destination, destination)
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

    def _dead_letter(
        self, message: Message, reason: str, store_key: str | None = None
    ) -> Deferred[bool] | None:
        """
        Move a message to the dead-letter queue of the destination it was sent to.

        A message that fails in a dead-letter queue is discarded, not dead-lettered
        again, so that nothing circulates for ever.  A message the store keeps
        under ``store_key`` leaves it too, for its copy in the dead-letter queue,
        in one atomic step; any other message's copy lives in memory only.

        :returns: that store write, or ``None``.
        """
        prefix = self.policy.dead_letter_prefix
        journal = self.journal if message.persistent else None
        if is_dead_letter_queue(message.destination, prefix):
            self.counters.discarded += 1
            self.traffic.count((message,), "messages_dropped")
            if journal is not None and store_key is not None:
                return journal.remove(store_key, message.message_id)
            return None
        target = dead_letter_destination(message.destination, prefix)
        headers = tuple(pair for pair in message.headers if pair[0] not in DEAD_LETTER_HEADERS)
        headers += (
            ("original-destination", message.destination),
            ("original-message-id", message.message_id),
            ("dead-letter-reason", reason),
        )
        self.counters.dead_lettered += 1
        self.traffic.count((message,), "messages_dead_lettered")
        log.debug(
            "dead-lettered {message_id} from {origin} to {target}: {reason}",
            message_id=message.message_id,
            origin=message.destination,
            target=target,
            reason=reason,
        )
        stored = journal is not None and store_key is not None
        copy = Message(target, self._new_message_id(), headers, message.body, persistent=stored)
        moved = None
        if journal is not None and store_key is not None:
            moved = journal.move(store_key, message.message_id, target, copy)
        self._shared_queue(target).enqueue(copy)
        return moved

    # -- publishing ------------------------------------------------------------

    def send(
        self,
        destination: str,
        headers: Headers,
        body: bytes,
        *,
        connection: Any = None,
        transaction: str | None = None,
    ) -> Deferred[None] | None:
        """
        Route one message: to every matching topic subscription, or onto a queue.

        :param connection: the sending connection, which owns its ``/temp-queue/``
            destinations and transactions; ``None`` for a message from Python code.
        :param transaction: hold the message until this transaction commits.
        :returns: ``None``; or, for a persistent message that the store keeps, a
            Deferred that fires once it is durable (it is enqueued already), or
            fails with :class:`~stompbroker.broker.persistence.MessageNotStored`.
        :raises InvalidDestination: for a wildcard or an unknown kind of destination.
        :raises MalformedFrame: for an ``expires`` or ``expiration`` header that is
            not a number of milliseconds.
        :raises UnknownTransaction: if ``transaction`` is not open on ``connection``.
        """
        return self._send(destination, headers, body, connection, transaction)[1]

    def _send(
        self,
        destination: str,
        headers: Headers,
        body: bytes,
        connection: Any,
        transaction: str | None,
    ) -> tuple[Message, Deferred[None] | None]:
        """:returns: the routed message, and what :meth:`send` returns."""
        kind = self._checked.get(destination)
        if kind is None:
            kind = self._check(destination)
        route: Callable[[Message], None]
        if kind is Kind.TOPIC:
            route = self._publish_topic
        elif kind is Kind.QUEUE:
            route = self._publish_queue
        elif kind is Kind.TEMP_QUEUE:
            route = self._temp_queue(connection, destination).publish
        else:
            route = self._publish_reply
        held = None
        if transaction is not None:
            held = self._held_in(connection, transaction)
        headers, expires, persistent = self._prepare(headers, connection, kind)
        message = Message(
            destination,
            f"{self._node}-{next(self._message_ids)}",
            headers,
            body,
            expires,
            0,
            persistent,
        )
        waiting = None
        if held is not None:
            if persistent:
                held.hold(self._store_and_route, route, message)
            else:
                held.hold(route, message)
        else:
            if persistent:
                waiting = self._store_and_route(route, message)
            else:
                route(message)
            if self._pausing:
                self._pause_sender(connection)
        traffic = self.traffic
        if traffic.sampling:
            counted = traffic.destinations.get(destination) or traffic.of(destination)
            counted.producers[connection] = traffic.generation
        return message, waiting

    def _store_and_route(
        self, route: Callable[[Message], None], message: Message
    ) -> Deferred[None] | None:
        """
        File a persistent message under every key that keeps it, then route it.

        The keys are its queue, or the durable subscriptions its topic matches now.
        The store takes writes in the order they are asked for, so the adds come
        before any delivery mark that routing leads to.  A message that has
        expired already is routed (to be expired) without being filed.

        :returns: the adds' Deferred, or ``None`` if nothing keeps the message.
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
        waiting = self.journal.add(keys, message)
        route(message)
        return waiting

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

    def _prepare(
        self, headers: Headers, connection: Any, kind: Kind
    ) -> tuple[Headers, float, bool]:
        """
        Read a SEND's expiry and persistence, and rewrite its temporary ``reply-to``.

        :param kind: the kind of its destination; only queues and topics keep
            persistent messages (temporary queues end with their connection).
        :returns: the headers to deliver, the expiry in clock seconds (0 for
            never), and whether the message is persistent.
        """
        ttl = self.policy.ttl
        acted_on = self._acted_on
        for name, _ in headers:
            if name in acted_on:
                break
        else:
            persistent = self.persistent_queues and kind is Kind.QUEUE
            if ttl:
                return headers, self.clock.seconds() + ttl / 1000.0, persistent
            return headers, 0.0, persistent
        found: dict[str, str] = {}
        rewritten = []
        for name, value in headers:
            if name in acted_on and name not in found:
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
        if kind is Kind.QUEUE:
            persistent = self.persistent_queues or found.get("persistent") == "true"
        else:
            persistent = kind is Kind.TOPIC and found.get("persistent") == "true"
        return tuple(rewritten), expires, persistent

    def _publish_topic(self, message: Message) -> None:
        # Counted once per SEND, not per delivery (see stompbroker.broker.traffic).
        traffic = self.traffic.destinations.get(message.destination)
        if traffic is None:
            traffic = self.traffic.of(message.destination)
        size = len(message.body)
        traffic.messages_in += 1
        traffic.bytes_in += size
        if message.expires and message.expires <= self.clock.seconds():
            self._expired(message)
            return
        matches = self.topics.match(message.destination)
        for subscriber in matches:
            subscriber.deliver(message)
        topics = self.topics
        direct = topics.direct(matches) if topics.queues else len(matches)
        if direct:
            traffic.messages_delivered += direct
            traffic.messages_acked += direct
            traffic.bytes_out += direct * size
            self.traffic.routed_directly(message.destination, traffic, message)

    def _publish_queue(self, message: Message) -> None:
        self._shared_queue(message.destination).publish(message)

    def _publish_reply(self, message: Message) -> None:
        queue = self.queues.get(message.destination)
        if queue is None:
            # The requester has gone: its replies have nowhere to go (as in RabbitMQ).
            self.counters.discarded += 1
            self.traffic.published(message)
            self.traffic.count((message,), "messages_dropped")
            return
        queue.publish(message)

    def _expired(self, message: Message) -> None:
        """Count a message that expired before any queue took it; drop or dead-letter it."""
        self.counters.expired += 1
        self.traffic.count((message,), "messages_expired")
        if self.policy.expired == "dead-letter":
            self._dead_letter(message, EXPIRED)

    def publish(
        self,
        destination: str,
        body: bytes | str,
        headers: Iterable[tuple[str, str]] | None = None,
    ) -> Message:
        """
        Publish a message from Python code in the broker's process.

        This is the embedding API: no client connection is involved, and the
        message is routed exactly as a SEND from a client would be.

        :param destination: e.g. ``/topic/prices`` or ``/queue/jobs``.
        :param body: the payload; text is encoded as UTF-8 and gets a
            ``content-type`` of ``text/plain;charset=utf-8`` unless one is given.
        :param headers: extra ``(name, value)`` headers for subscribers;
            ``persistent:true`` files it in the store as a client's SEND would be,
            but nothing waits for that (a failure is logged).
        :returns: the routed message.
        """
        pairs = list(headers or ())
        if isinstance(body, str):
            body = body.encode("utf-8")
            if not any(name == "content-type" for name, _ in pairs):
                pairs.append(("content-type", "text/plain;charset=utf-8"))
        message, waiting = self._send(destination, tuple(pairs), body, None, None)
        if waiting is not None:
            # The journal has logged the failure; nobody else is there to hear of it.
            waiting.addErrback(lambda failure: None)
        return message

    # -- acknowledgements ------------------------------------------------------

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
            back after a crash), or fails with
            :class:`~stompbroker.broker.persistence.MessageNotStored`.
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
                    return settled(consumer.queue.acknowledge(consumer, found))
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
            self._held_in(connection, transaction).hold(
                self._refuse, consumer, message_id, requeue
            )
            return None
        return self._refuse(consumer, message_id, requeue)

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
    def _acknowledge(consumer: Consumer, message_id: str) -> Deferred[None] | None:
        found = consumer.settle(message_id)
        if not found:
            return None
        return settled(consumer.queue.acknowledge(consumer, found))

    def _refuse(
        self, consumer: Consumer, message_id: str, requeue: bool
    ) -> Deferred[None] | None:
        found = consumer.settle(message_id)
        if not found:
            return None
        self.traffic.count(found, "messages_nacked")
        if requeue:
            return settled(consumer.queue.requeue(consumer, found))
        return settled(consumer.queue.reject(found))

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
        :raises LimitExceeded: if ``max_transactions`` are open there already.
        """
        table = self._transactions(connection)
        limit = self.limits.max_transactions
        if limit and len(table) >= limit:
            raise LimitExceeded(
                "too many transactions",
                f"a connection may have at most {limit} transactions open (max-transactions)",
            )
        table.begin(transaction)

    def _held_in(self, connection: Any, transaction: str) -> Transaction:
        """
        :returns: the open transaction that is to hold one more frame.
        :raises UnknownTransaction: if it is not open.
        :raises LimitExceeded: if it holds ``max_transaction_frames`` already.
        """
        held = self._transactions(connection).get(transaction)
        limit = self.limits.max_transaction_frames
        if limit and len(held) >= limit:
            raise LimitExceeded(
                "transaction too large",
                f"a transaction may hold at most {limit} SEND, ACK and NACK frames"
                " (max-transaction-frames)",
            )
        return held

    def commit(self, connection: Any, transaction: str) -> Deferred[None] | None:
        """
        Perform, in order and at once, the SENDs, ACKs and NACKs a transaction holds.

        Its persistent messages are filed in the store now, at COMMIT.

        :returns: ``None``, or a Deferred that fires once the persistent messages
            it sent are durable, as :meth:`send` returns.
        :raises UnknownTransaction: if it is not open.
        """
        waiting = all_done(self._transactions(connection).commit(transaction))
        if self._pausing:
            self._pause_sender(connection)
        return waiting

    def abort(self, connection: Any, transaction: str) -> None:
        """
        Discard what a transaction holds; messages it acknowledged stay unacknowledged.

        :raises UnknownTransaction: if it is not open.
        """
        self._transactions(connection).abort(transaction)
