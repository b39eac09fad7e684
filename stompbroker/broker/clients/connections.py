"""
The connection registry: which clients are connected, within which limits, and
what the broker keeps for each of them.

A connection is an :class:`~stompbroker.interfaces.IConnection` (a session);
the registry admits it within ``max_connections`` and
``max_connections_per_address`` (:class:`~stompbroker.broker.flow.broker_limits.Limits`),
gives it a broker-unique session id, and keeps a :class:`ConnectionState` for
it: the consumers of its subscriptions, its open transactions, and its
temporary queues, which end with it.  When the broker stops, the registry turns
new connections away and tells every open one to close (:meth:`ConnectionRegistry.shut_down`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from attrs import Factory, define
from twisted.internet.defer import Deferred, succeed

from stompbroker.broker.clients.transactions import TransactionTable
from stompbroker.broker.flow.broker_limits import Limits
from stompbroker.broker.flow.traffic import Traffic
from stompbroker.broker.queueing.delivery import Consumer
from stompbroker.broker.queueing.wildcard import WildcardConsumer
from stompbroker.broker.routing.destinations import validate_queue
from stompbroker.broker.routing.ids import Ids
from stompbroker.logs import logger
from stompbroker.protocol.errors import InvalidDestination, LimitExceeded, ShuttingDown

log = logger("stompbroker.broker")


def host_of(connection: Any) -> str:
    """:returns: the host part of a connection's ``peer`` (``HOST:PORT``)."""
    peer: str = connection.peer
    host, colon, _ = peer.rpartition(":")
    return host if colon else peer


@define(eq=False)
class ConnectionState:
    """
    What the broker keeps for one connection.

    :ivar consumers: subscriber -> its :class:`~stompbroker.broker.queueing.delivery.Consumer`,
        for every subscription that takes from a queue (a
        :class:`~stompbroker.broker.queueing.wildcard.WildcardConsumer` for one
        that takes from every queue a pattern matches).
    :ivar transactions: the connection's open transactions.
    :ivar temp_queues: ``/temp-queue/NAME`` -> the connection's queue of that name.
    """

    consumers: dict[Any, Consumer | WildcardConsumer] = Factory(dict)
    transactions: TransactionTable = Factory(TransactionTable)
    temp_queues: dict[str, Any] = Factory(dict)


class ConnectionRegistry:
    """
    The broker's client connections.

    :param limits: the broker's limits on connections.
    :param traffic: counts connections opened and closed.
    :param ids: gives session ids.
    :param engine: the :class:`~stompbroker.broker.engine.engine_interface.IEngine` that makes and
        deletes temporary queues.
    :param admit: asked with a new connection's host, once the limits above have
        let it in: raises :class:`LimitExceeded` to refuse it (the connection rate
        of :class:`~stompbroker.broker.flow.rate_gates.RateLimiter`).

    :ivar connections: the connections open now.
    :ivar states: connection -> its :class:`ConnectionState`.
    :ivar stopping: the broker is stopping, and admits nobody.
    """

    def __init__(
        self,
        limits: Limits,
        traffic: Traffic,
        ids: Ids,
        engine: Any,
        admit: Callable[[str], None] | None = None,
    ) -> None:
        self.connections: set[Any] = set()
        self.states: dict[Any, ConnectionState] = {}
        self.stopping = False
        self._limits = limits
        self._traffic = traffic
        self._engine = engine
        self._admit = admit
        #: Connections per client host, for ``max_connections_per_address``.
        self._per_host: dict[str, int] = {}
        self.new_session_id = ids.new_session_id

    def open(self, connection: Any) -> None:
        """
        Admit a connection.

        :raises LimitExceeded: when ``max_connections`` are already open, or
            ``max_connections_per_address`` from the connection's host, or ``admit`` refuses.
        :raises ShuttingDown: once the broker is stopping.
        """
        if self.stopping:
            raise ShuttingDown(
                "broker shutting down", "the broker is stopping and takes no new connections"
            )
        limit = self._limits.max_connections
        if limit and len(self.connections) >= limit:
            raise LimitExceeded(
                "too many connections",
                f"the broker allows at most {limit} connections (max-connections)",
            )
        host = host_of(connection)
        per_host = self._limits.max_connections_per_address
        if per_host and self._per_host.get(host, 0) >= per_host:
            raise LimitExceeded(
                "too many connections from this address",
                f"the broker allows at most {per_host} connections from one address"
                " (max-connections-per-address)",
            )
        if self._admit is not None:
            self._admit(host)
        self._per_host[host] = self._per_host.get(host, 0) + 1
        self.connections.add(connection)
        self._traffic.connections_opened += 1
        self.states[connection] = ConnectionState()

    def close(self, connection: Any) -> ConnectionState | None:
        """
        Count a connection closed and free its place; its state stays until
        :meth:`forget`, so that its subscriptions can be undone first.

        :returns: its state, or ``None`` if it has none.
        """
        if connection in self.connections:
            self.connections.discard(connection)
            self._traffic.connections_closed += 1
            host = host_of(connection)
            remaining = self._per_host[host] - 1
            if remaining:
                self._per_host[host] = remaining
            else:
                del self._per_host[host]
        return self.states.get(connection)

    def forget(self, connection: Any) -> None:
        """Drop a closed connection's state, and delete its temporary queues."""
        state = self.states.pop(connection, None)
        if state is None:
            return
        for queue in state.temp_queues.values():
            self._engine.delete_queue(queue)

    def state(self, connection: Any) -> ConnectionState:
        """:returns: the state of ``connection``, made on first use."""
        state = self.states.get(connection)
        if state is None:
            state = self.states[connection] = ConnectionState()
        return state

    def temp_queue(self, connection: Any, destination: str) -> Any:
        """
        :param destination: ``/temp-queue/NAME``.
        :returns: the connection's temporary queue of that name, made on first use
            under a broker-unique ``/reply-queue/`` destination.
        :raises InvalidDestination: without a connection, or for an invalid name.
        """
        if connection is None:
            raise InvalidDestination(
                "temporary queue without a connection",
                f"{destination!r} belongs to a client connection; publish to /queue/ instead",
            )
        validate_queue(destination)
        state = self.state(connection)
        queue = state.temp_queues.get(destination)
        if queue is None:
            queue = state.temp_queues[destination] = self._engine.new_reply_queue()
        return queue

    # -- the socket's pace ---------------------------------------------------------------

    def pause_consumers(self, connection: Any) -> None:
        """
        A connection's socket has fallen behind: give its queue consumers nothing more.

        Their messages wait in their queues (:meth:`Consumer.has_room`) until
        :meth:`resume_consumers`.
        """
        state = self.states.get(connection)
        if state is not None:
            for consumer in state.consumers.values():
                consumer.paused = True

    def resume_consumers(self, connection: Any) -> None:
        """A connection's socket has caught up: its queue consumers get messages again."""
        state = self.states.get(connection)
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

    # -- stopping ------------------------------------------------------------------------

    def shut_down(self, clock: Any) -> Deferred[None]:
        """
        Refuse new connections, and tell every client that the broker is shutting down.

        Each connection gets an ERROR and closes once what was written to it is
        flushed.

        :param clock: ``callLater``, for the deadline.
        :returns: a Deferred that fires when they all have closed, or after
            ``shutdown_timeout`` seconds, whichever comes first: connections still
            open then are dropped when the reactor stops.
        """
        self.stopping = True
        closing = set(self.connections)
        if not closing:
            return succeed(None)
        timeout = self._limits.shutdown_timeout
        drained: Deferred[None] = Deferred()
        log.info(
            "shutting down: telling {count} clients, waiting at most {timeout} s",
            count=len(closing),
            timeout=timeout,
        )

        def give_up() -> None:
            log.warn(
                "shutting down: {count} connections did not close within {timeout} s",
                count=len(closing),
                timeout=timeout,
            )
            drained.callback(None)

        deadline = clock.callLater(timeout, give_up)

        def closed(connection: Any) -> None:
            closing.discard(connection)
            if not closing and deadline.active():
                deadline.cancel()
                drained.callback(None)

        for connection in list(closing):
            connection.shut_down(closed)
        return drained
