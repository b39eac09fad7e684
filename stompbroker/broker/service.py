"""
The broker: the one service every listener of a process feeds.

:class:`Broker` is a Twisted service that starts and stops the broker's parts
and answers :class:`stompbroker.interfaces.IBroker`, which is all a session asks
of it.  It never sees bytes or transports, and holds no destination itself:

- the **engine** (:class:`~stompbroker.broker.engine.engine_interface.IEngine`; by default the
  in-process engine, :mod:`stompbroker.broker.engine.local`) holds the
  topic subscriptions, queues, durable subscriptions and the message store;
- the **router** (:mod:`stompbroker.broker.routing.router`) routes each SEND to them;
- the **consumers** (:mod:`stompbroker.broker.clients.consumers`) attach subscriptions
  and settle their ACKs and NACKs;
- the **connection registry** (:mod:`stompbroker.broker.clients.connections`) admits
  connections within their limits and keeps what belongs to each;
- **transactions** (:mod:`stompbroker.broker.clients.transactions`) hold frames until COMMIT;
- **back-pressure** (:mod:`stompbroker.broker.flow.backpressure`) pauses publishers
  while memory is high or a slow subscriber blocks them, and persistent publishers
  while the disk alarm is on;
- **recovery** (:mod:`stompbroker.broker.store.recovery`) says when the engine has
  rebuilt what its store holds, and dead letters
  (:mod:`stompbroker.broker.queueing.dead_letters`) go where the policy says.

The methods a session calls per message (``send``, ``ack``, ``nack``, and a slow
subscriber's ``block_sender`` and ``count_dropped``) are the parts' own methods,
bound once to the broker, so that they cost no call through this class.

Persistent messages (see :mod:`stompbroker.broker.store.journal`): with a message
store, a ``persistent:true`` SEND to a queue (every queue SEND with
``persistent_queues``), or to a topic with durable subscriptions, is filed in the
store under each key that keeps it and enqueued in memory at once;
:meth:`Broker.send` returns the Deferred of those writes, on which the session
holds the RECEIPT.  Every other SEND returns ``None``.  At start
(:meth:`Broker.startService`) the engine rebuilds its queues and durable
subscriptions from the store; :meth:`Broker.when_ready` says when that is done,
and only then should clients be let in.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from twisted.application.service import Service
from twisted.internet.defer import Deferred
from twisted.internet.interfaces import IReactorTime
from zope.interface import implementer

from stompbroker.broker.clients.connections import ConnectionRegistry
from stompbroker.broker.clients.consumers import Consumers
from stompbroker.broker.clients.hosted import HostedBroker
from stompbroker.broker.clients.transactions import Transactions
from stompbroker.broker.clients.user_actions import UserActions
from stompbroker.broker.engine.factory import build_engine
from stompbroker.broker.features.policies import Policies, Policy
from stompbroker.broker.features.presence import Presence
from stompbroker.broker.flow.backpressure import BackPressure, MemoryAlarm
from stompbroker.broker.flow.broker_limits import Limits
from stompbroker.broker.flow.disk_alarm import DiskAlarm
from stompbroker.broker.flow.rate_gates import RateLimiter
from stompbroker.broker.flow.rate_limits import RateLimits
from stompbroker.broker.queueing.delivery import DeliveryPolicy
from stompbroker.broker.queueing.paging import PagingBudget
from stompbroker.broker.routing.router import Router
from stompbroker.broker.routing.virtual_hosts import VirtualHosts
from stompbroker.broker.store.recovery import Readiness
from stompbroker.interfaces import IBroker
from stompbroker.protocol.message import Message

DEFAULT_LIMITS = Limits()
DEFAULT_POLICY = DeliveryPolicy()
DEFAULT_RATE_LIMITS = RateLimits()


@implementer(IBroker)
class Broker(Service):
    """
    A STOMP broker, as a Twisted service.

    :param clock: the reactor (or a ``task.Clock``) that times the broker's work.
    :param limits: broker-wide :class:`~stompbroker.broker.flow.broker_limits.Limits`.
    :param policy: how messages are delivered, redelivered, dead-lettered and expired.
    :param store: an :class:`~stompbroker.broker.store.base.IMessageStore`, not
        yet open, that keeps persistent messages and durable subscriptions, and
        from which :meth:`startService` recovers them; ``None`` keeps every
        message in memory only, and ignores ``persistent`` headers.
    :param persistent_queues: with a store, treat every SEND to a ``/queue/`` as
        persistent, whatever its ``persistent`` header says.
    :param engine: where destinations' state lives, an
        :class:`~stompbroker.broker.engine.engine_interface.IEngine`; by default a
        in-process engine (:func:`~stompbroker.broker.engine.factory.build_engine`) on ``clock``,
        ``policy`` and ``store``.  An engine given here brings its own store:
        ``store`` must then be ``None``.
    :param stream_limits: how much each ``/stream/`` keeps
        (:class:`~stompbroker.broker.streams.offsets.StreamLimits`), for the
        default engine; an engine given here brings its own.
    :param rate_limits: the clients' :class:`~stompbroker.broker.flow.rate_limits.RateLimits`
        (none by default), applied by :attr:`rates`.
    :param virtual_hosts: the :class:`~stompbroker.broker.routing.virtual_hosts.VirtualHosts`
        CONNECT's ``host`` selects from (:meth:`select_host`); ``None`` for none.
    :raises ValueError: for both a ``store`` and an ``engine``.

    :ivar engine: the engine.
    :ivar connections: the client connections open now.
    :ivar counters: what happened to queued messages, broker-wide.
    :ivar traffic: what routing counts, per destination, for statistics
        (see :mod:`stompbroker.stats.model`).
    :ivar send: :meth:`stompbroker.broker.routing.router.Router.send`, as
        :meth:`IBroker.send <stompbroker.interfaces.IBroker.send>` describes it.
    :ivar ack: :meth:`stompbroker.broker.clients.consumers.Consumers.ack`, as
        :meth:`IBroker.ack <stompbroker.interfaces.IBroker.ack>` describes it.
    :ivar nack: :meth:`stompbroker.broker.clients.consumers.Consumers.nack`.
    :ivar block_sender: :meth:`stompbroker.broker.flow.backpressure.BackPressure.block_sender`.
    :ivar count_dropped: :meth:`stompbroker.broker.flow.backpressure.BackPressure.count_dropped`.
    :ivar new_session_id: :meth:`stompbroker.broker.routing.ids.Ids.new_session_id`.
    :ivar rates: the :class:`~stompbroker.broker.flow.rate_gates.RateLimiter`; the
        transports read a metered connection through its gate.
    """

    name = "broker"

    send: Callable[..., Deferred[None] | None]
    ack: Callable[..., Deferred[None] | None]
    nack: Callable[..., Deferred[None] | None]
    block_sender: Callable[[Any], None]
    count_dropped: Callable[..., None]
    new_session_id: Callable[[], str]

    def __init__(
        self,
        clock: IReactorTime,
        *,
        limits: Limits = DEFAULT_LIMITS,
        policy: DeliveryPolicy = DEFAULT_POLICY,
        store: Any = None,
        persistent_queues: bool = False,
        engine: Any = None,
        stream_limits: Any = None,
        rate_limits: RateLimits = DEFAULT_RATE_LIMITS,
        virtual_hosts: VirtualHosts | None = None,
        policies: tuple[Policy, ...] = (),
    ) -> None:
        if engine is None:
            paging = (
                PagingBudget(limits.queue_memory_budget, limits.read_ahead)
                if store is not None
                else None
            )
            engine = build_engine(
                clock, policy=policy, store=store, stream_limits=stream_limits, paging=paging
            )
        elif store is not None:
            raise ValueError("an engine keeps its own store: give the store to the engine")
        self.clock = clock
        self.limits = limits
        self.policy = policy
        self.engine = engine
        books = engine.bookkeeping()
        self.traffic = books.traffic
        self.counters = books.counters
        self.rates = RateLimiter(clock, rate_limits)
        self.registry = ConnectionRegistry(
            limits,
            books.traffic,
            books.ids,
            engine,
            admit=self.rates.admit if rate_limits.connection_rate is not None else None,
        )
        self.connections = self.registry.connections
        self.backpressure = BackPressure(
            clock,
            limits,
            books.counters,
            self.connections,
            disk_space=store.disk_space if store is not None else None,
        )
        engine.report_outages(self.backpressure)
        #: The :class:`~stompbroker.protocol.resume.resume_book.ResumeBook` of the
        #: listeners' resumable sessions, if any (:meth:`keep_resumable_sessions`).
        self.resumption: Any = None
        self.transactions = Transactions(self.registry, limits, self.backpressure)
        self.router = Router(
            clock,
            engine,
            self.registry,
            self.backpressure,
            self.transactions,
            policy,
            persistent_queues,
        )
        #: The per-destination policies in force (docs/policies.md): the
        #: configuration's, then what operators set at run time.
        self.policies: Policies = engine.policies
        for each in policies:
            self.policies.set(each)
        self.consumers = Consumers(engine, self.registry, self.transactions, policy, self.policies)
        #: Who subscribes to each shared destination, on every node sharing the
        #: engine (:mod:`stompbroker.broker.features.presence`).
        self.presence = Presence(books.ids.node, clock, books.ids.new_message_id)
        engine.share_presence(self.presence)
        #: A backend's actions on a user's sessions, here and on every other node.
        self.user_actions = UserActions(lambda: self.connections, lambda: self.resumption)
        self.user_actions.tell = engine.share_user_actions(self.user_actions.apply)
        self._readiness = Readiness()
        # The methods a session calls per message, bound once: its SEND, ACK and
        # NACK, and a slow subscriber's signals, reach the part that does the work
        # without a call through this class.
        self.send = self.router.send
        self.ack = self.consumers.ack
        self.nack = self.consumers.nack
        self.block_sender = self.backpressure.block_sender
        self.count_dropped = self.backpressure.count_dropped
        self.new_session_id = self.registry.new_session_id
        self.virtual_hosts = virtual_hosts
        #: Each virtual host's view (``None``: the default host's), made once.
        self._hosted: dict[str | None, HostedBroker] = {}
        #: The virtual host of each open connection in one, for management.
        self._host_names: dict[Any, str] = {}
        if virtual_hosts is not None:
            self._hosted[None] = HostedBroker(self, None)
            for host in virtual_hosts.hosts.values():
                self._hosted[host.name] = HostedBroker(self, host)

    def select_host(self, connection: Any, header: str | None) -> HostedBroker | None:
        """
        CONNECT's ``host`` header: which virtual host the connection works in.

        :param connection: the connecting :class:`~stompbroker.interfaces.IConnection`.
        :param header: the ``host`` header, ``None`` if absent.
        :returns: the view of the broker the session calls from now on (with
            :meth:`HostedBroker.session_config` for its settings), or ``None``
            when no virtual host is configured: the session calls the broker.
        :raises UnknownVirtualHost: for a ``host`` that names none, when the
            broker refuses those.
        """
        hosts = self.virtual_hosts
        if hosts is None:
            return None
        host = hosts.select(header)
        if host is not None:
            # Sessions open their connection before CONNECT, and close it after.
            self._host_names[connection] = host.name
        return self._hosted[None if host is None else host.name]

    def host_name(self, connection: Any) -> str | None:
        """:returns: the virtual host ``connection`` works in, ``None`` for the default host."""
        return self._host_names.get(connection)

    @property
    def persistent_queues(self) -> bool:
        """Whether every SEND to a ``/queue/`` is persistent."""
        return self.router.persistent_queues

    @property
    def memory_gauge(self) -> Callable[[], int] | None:
        """Measures the memory in use for the watermark; tests replace it before a start."""
        return self.backpressure.memory_gauge

    @memory_gauge.setter
    def memory_gauge(self, gauge: Callable[[], int] | None) -> None:
        self.backpressure.memory_gauge = gauge

    def has_virtual_hosts(self) -> bool:
        """:returns: whether virtual hosts are configured (statistics then name each one)."""
        return self.virtual_hosts is not None

    def memory_alarm(self) -> MemoryAlarm:
        """:returns: the memory watermark's state now: whether publishers are paused for memory."""
        return self.backpressure.memory_alarm()

    def disk_alarm(self) -> DiskAlarm:
        """:returns: the disk alarm's state now: whether persistent publishers are held."""
        return self.backpressure.disk_alarm()

    def keep_resumable_sessions(self, book: Any) -> None:
        """
        The listeners keep their resumable sessions in ``book`` (the
        :class:`~stompbroker.protocol.resume.resume_book.ResumeBook` of their
        ``SessionConfig``): show them to operators (stats, management) and
        count their buffers in the memory watermark, which sheds them before
        it pauses publishers.  Call before the broker starts.
        """
        self.resumption = book
        self.backpressure.count_held(book)

    # -- life cycle --------------------------------------------------------------------

    def startService(self) -> None:
        """
        Start: open the engine's store, if there is one, and rebuild queues and
        durable subscriptions from it.

        Opening is synchronous, so that a store that cannot be used stops the
        start; recovery is not (the store reads in its writer thread): let
        clients in once :meth:`when_ready` fires.  The memory watermark starts
        watching too.

        :raises stompbroker.broker.store.base.StoreError: if the store cannot be
            opened (locked, damaged, unavailable); the broker is then not running.

        Scheduled messages recovered from the store are timed once recovery is
        done; the timer stops with the broker.
        """
        self.engine.open()
        super().startService()
        self.registry.stopping = False
        self.backpressure.start()
        recovered = self.engine.recover()
        recovered.addCallback(self._arm_schedule)
        recovered.addBoth(self._readiness.ended)

    def _arm_schedule(self, result: None) -> None:
        """Recovery has put the stored scheduled messages back: time them."""
        if self.router.scheduling is not None:
            self.router.scheduling.arm()

    def stopService(self) -> Deferred[None] | None:
        """
        Stop gracefully: shut every client connection down (see
        :meth:`~stompbroker.broker.clients.connections.ConnectionRegistry.shut_down`), and
        stop the engine (closing the store) once everything written before is durable.

        :returns: a Deferred that fires when both are done.
        """
        super().stopService()
        self.backpressure.stop()
        if self.router.scheduling is not None:
            self.router.scheduling.stop()
        drained = self.registry.shut_down(self.clock)
        stopped: Deferred[None] | None = self.engine.stop(drained)
        return stopped

    def when_ready(self) -> Deferred[None]:
        """
        :returns: a Deferred that fires once :meth:`startService` has rebuilt
            everything the store holds, or fails with what stopped it (a
            :class:`~stompbroker.broker.store.base.StoreError`, say); let clients in
            only after it fires.
        """
        return self._readiness.when_ready()

    # -- connections -------------------------------------------------------------------

    def open_connection(self, connection: Any) -> None:
        """
        Admit a connection.

        :raises LimitExceeded: when ``max_connections`` are already open, or
            ``max_connections_per_address`` from the connection's host.
        :raises ShuttingDown: once the broker is stopping.
        """
        self.registry.open(connection)

    def close_connection(self, connection: Any) -> None:
        """
        Forget a connection: abort its open transactions, return what its
        subscriptions hold, delete its temporary queues.
        """
        state = self.registry.close(connection)
        self.backpressure.forget(connection)
        self._host_names.pop(connection, None)
        if state is None:
            return
        state.transactions.abort_all()
        for subscriber in list(state.consumers):
            self.consumers.unsubscribe(subscriber)
        self.registry.forget(connection)

    def pause_consumers(self, connection: Any) -> None:
        """
        A connection's socket has fallen behind: give its queue consumers nothing
        more; their messages wait in their queues until :meth:`resume_consumers`.
        """
        self.registry.pause_consumers(connection)

    def resume_consumers(self, connection: Any) -> None:
        """
        A connection's socket has caught up: its queue consumers get messages
        again, the publishers it blocked go on, and a drop episode ends.
        """
        self.backpressure.resume(connection)
        self.registry.resume_consumers(connection)

    def slow_consumer(self, destinations: Any, policy: str, buffer: int) -> tuple[str, int]:
        """:returns: a connection's slow-consumer policy and buffer (``Policies.slow_consumer``)."""
        return self.policies.slow_consumer(destinations, policy, buffer)

    # -- subscriptions -----------------------------------------------------------------

    def subscribe(self, subscriber: Any) -> None:
        """
        Deliver matching messages to ``subscriber`` from now on.

        :raises InvalidDestination: for a destination the broker does not serve,
            an invalid pattern, or a reply queue.
        :raises DuplicateSubscription: for a durable name in use on another topic.
        :raises ProtocolError: for a ``presence`` header it cannot have
            (:meth:`~stompbroker.broker.features.presence.Presence.watches`).
        """
        watch = self.presence.watches(subscriber)
        self.consumers.subscribe(subscriber)
        self.presence.join(subscriber, watch)

    def unsubscribe(self, subscriber: Any) -> None:
        """
        Stop delivering to ``subscriber``; unknown ones are ignored.

        What it holds unacknowledged goes back to its queue for redelivery; a topic
        subscription's own queue (unless durable) is deleted with what it holds.
        """
        self.presence.leave(subscriber)
        self.consumers.unsubscribe(subscriber)

    def away(self, subscriber: Any) -> None:
        """:meth:`stompbroker.interfaces.IBroker.away`: tell presence."""
        self.presence.away(subscriber)

    def remove_durable(self, durable: tuple[str, str]) -> None:
        """
        Delete a durable subscription and the messages it has collected.

        :param durable: ``(client-id, name)``, as in ``ISubscriber.durable``.
        :raises UnknownSubscription: if there is no such durable subscription.
        """
        self.engine.remove_durable(durable)

    # -- publishing -------------------------------------------------------------------

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
        return self.router.publish(destination, body, headers)

    # -- transactions ------------------------------------------------------------------

    def begin(self, connection: Any, transaction: str) -> None:
        """
        Open a transaction on a connection.

        :raises DuplicateTransaction: if one of that id is open there already.
        :raises LimitExceeded: if ``max_transactions`` are open there already.
        """
        self.transactions.begin(connection, transaction)

    def commit(self, connection: Any, transaction: str) -> Deferred[None] | None:
        """
        Perform, in order and at once, the SENDs, ACKs and NACKs a transaction holds.

        :returns: ``None``, or a Deferred that fires once the persistent messages
            it sent are durable, as :meth:`send` returns.
        :raises UnknownTransaction: if it is not open.
        """
        return self.transactions.commit(connection, transaction)

    def abort(self, connection: Any, transaction: str) -> None:
        """
        Discard what a transaction holds; messages it acknowledged stay unacknowledged.

        :raises UnknownTransaction: if it is not open.
        """
        self.transactions.abort(connection, transaction)
