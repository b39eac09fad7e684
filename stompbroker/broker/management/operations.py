"""
What an operator may do to a running broker: the operations behind the
management API (:mod:`stompbroker.web.api`) and the ``stompbroker`` command line.

:class:`Management` reads and changes the broker through its parts and its
engine, and answers with plain attrs records; it knows nothing of HTTP, JSON or
rights (the web layer checks those before it calls).  Every operation either
does all it says or raises before it changes anything:

- connections: list them, describe one, close one (the client gets an ERROR
  saying an operator closed it, :class:`~stompbroker.protocol.errors.ClosedByOperator`);
- detached resumable sessions: list them, end one for good
  (:mod:`stompbroker.broker.management.detached_sessions`, :attr:`Management.detached`);
- destinations: list queues, durable subscriptions and the topics that have
  had traffic, describe one with its consumers;
- what waits in a queue: browse (peek at) it, purge it, delete a queue or a
  durable subscription, move or copy messages to another destination, and send
  a dead-letter queue's messages back to where they were first sent
  (:class:`~stompbroker.broker.management.queue_operations.QueueOperations`,
  :attr:`Management.queues`);
- who subscribes to a destination, on every node (presence);
- publish a message, as :meth:`~stompbroker.broker.service.Broker.publish` does;
- the nodes that share the engine.

The records it answers with and the exceptions it refuses with are in
:mod:`stompbroker.broker.management.records`.

Names: a connection is known by its session id (the ``session`` header of its
CONNECTED frame), or by its address before it has one.  A durable subscription
is known by its store key, ``durable:["CLIENT-ID","NAME"]``
(:func:`~stompbroker.broker.store.journal.durable_key`), since neither its
client-id nor its name is a destination.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from stompbroker.broker.engine.node_figures import StreamRange
from stompbroker.broker.management.detached_sessions import DetachedSessions
from stompbroker.broker.management.queue_operations import (
    OPERATOR,
    QueueOperations,
    check_publish_target,
)
from stompbroker.broker.management.records import (
    ConnectionInfo,
    ConsumerInfo,
    DestinationInfo,
    InUse,
    InvalidRequest,
    SubscriptionInfo,
    UnknownConnection,
    UnknownDestination,
    UserSessions,
)
from stompbroker.broker.queueing.wildcard import in_flight as held_unacked
from stompbroker.broker.routing.destinations import QUEUE_PREFIX, STREAM_PREFIX, TOPIC_PREFIX
from stompbroker.broker.routing.syntax import is_wildcard
from stompbroker.broker.routing.virtual_hosts import DEFAULT_HOST
from stompbroker.broker.store.journal import durable_key
from stompbroker.logs import logger
from stompbroker.protocol.errors import ClosedByOperator, InvalidDestination, MalformedFrame
from stompbroker.protocol.frames import Headers
from stompbroker.protocol.message import Message

__all__ = [
    "ConnectionInfo",
    "ConsumerInfo",
    "DestinationInfo",
    "InUse",
    "InvalidRequest",
    "Management",
    "SubscriptionInfo",
    "UnknownConnection",
    "UnknownDestination",
    "UserSessions",
]

log = logger("stompbroker.broker.management.operations")


def connection_id(connection: Any) -> str:
    """:returns: how the management API names a connection (see the module notes)."""
    return str(connection.session_id or connection.peer)


class Management:
    """
    The operator's view of one broker, and what the operator may do to it.

    :param broker: the :class:`~stompbroker.broker.service.Broker`; its connections
        describe themselves (:meth:`~stompbroker.interfaces.IConnection.describe`)
        and list their subscriptions
        (:meth:`~stompbroker.interfaces.IConnection.subscribers`).

    :ivar queues: what an operator may do to what waits in a queue.
    """

    def __init__(self, broker: Any) -> None:
        self.broker = broker
        self._engine = broker.engine
        self.queues = QueueOperations(broker.engine, broker.policy)
        #: The resumable sessions waiting for their client.
        self.detached = DetachedSessions(broker)

    # -- connections -------------------------------------------------------------------

    def connections(self) -> list[ConnectionInfo]:
        """:returns: every open connection, oldest first."""
        self._count_topic_deliveries()
        described = [self._describe(connection) for connection in self.broker.connections]
        described.sort(key=lambda info: (info.connected_since, info.peer))
        return described

    def connection(self, ident: str) -> ConnectionInfo:
        """:raises UnknownConnection: if no open connection has the id ``ident``."""
        self._count_topic_deliveries()
        return self._describe(self._find(ident))

    def _count_topic_deliveries(self) -> None:
        """
        Tell direct topic subscriptions what they were sent, which they learn in
        batches (:mod:`stompbroker.broker.flow.traffic`), so that a connection's
        frames, bytes and messages out are up to date, as ``/stats`` makes them.
        """
        self._engine.report_deliveries()

    def close_connection(
        self, ident: str, reason: str = "", *, operator: str = OPERATOR
    ) -> ConnectionInfo:
        """
        Close a connection: the client gets an ERROR "closed by an operator" (with
        ``reason`` in its body), then the connection closes, as at a shutdown.

        :param operator: who asks, for the log (``alice at 10.0.0.5``).

        :returns: what it was just before.
        :raises UnknownConnection: if no open connection has the id ``ident``.
        """
        connection = self._find(ident)
        info = self._describe(connection)
        log.info(
            "{operator} closed connection {id} from {peer}",
            operator=operator,
            id=info.id,
            peer=info.peer,
        )
        connection.fail(ClosedByOperator(reason))
        return info

    # -- a user's sessions (what an application's backend asks) -------------------------

    def user_sessions(self, login: str) -> UserSessions:
        """:returns: the connections of ``login`` on this node, and its detached sessions."""
        connections = tuple(info for info in self.connections() if info.login == login)
        detached = tuple(info for info in self.detached.list() if info.login == login)
        return UserSessions(login, connections, detached)

    def disconnect_user(
        self, login: str, reason: str = "", *, operator: str = OPERATOR
    ) -> UserSessions:
        """
        Close every connection of ``login`` (each gets an ERROR "closed by an
        operator" with ``reason``) and end its detached sessions, whose tokens
        no longer resume: a user banned, or logged out everywhere.  Every node
        sharing the engine does the same with its own.

        :returns: what was closed and ended on this node.
        """
        sessions = self.user_sessions(login)
        self.broker.user_actions.disconnect(login, reason)
        log.info(
            "{operator} disconnected {login!r} ({count} connections here)",
            operator=operator,
            login=login,
            count=len(sessions.connections),
        )
        return sessions

    def unsubscribe_user(
        self, login: str, destination: str, reason: str = "", *, operator: str = OPERATOR
    ) -> int:
        """
        End every subscription of ``login``'s connections to ``destination``
        (as its SUBSCRIBE named it), on every node: each client gets a last
        MESSAGE saying so (:meth:`~stompbroker.interfaces.IConnection.end_subscription`).

        :returns: how many subscriptions it ended on this node.
        """
        ended: int = self.broker.user_actions.unsubscribe(login, destination, reason)
        log.info(
            "{operator} unsubscribed {login!r} from {destination} ({count} here)",
            operator=operator,
            login=login,
            destination=destination,
            count=ended,
        )
        return ended

    def _find(self, ident: str) -> Any:
        for connection in self.broker.connections:
            if connection_id(connection) == ident:
                return connection
        raise UnknownConnection(f"no open connection has the id {ident!r}")

    def _describe(self, connection: Any) -> ConnectionInfo:
        described = connection.describe()
        state = self.broker.registry.states.get(connection)
        consumers = state.consumers if state is not None else {}
        subscriptions = []
        for subscription in connection.subscribers():
            consumer = consumers.get(subscription)
            durable = subscription.durable
            subscriptions.append(
                SubscriptionInfo(
                    id=subscription.subscription_id,
                    destination=subscription.destination,
                    ack=subscription.ack_mode,
                    in_flight=len(consumer.unacked) if consumer is not None else 0,
                    durable=durable_key(durable) if durable is not None else None,
                )
            )
        return ConnectionInfo(
            id=connection_id(connection),
            peer=described.address,
            login=described.user,
            transport=described.transport,
            version=described.version,
            subscriptions=tuple(subscriptions),
            frames_in=described.frames_in,
            frames_out=described.frames_out,
            bytes_in=described.bytes_in,
            bytes_out=described.bytes_out,
            messages_in=described.messages_in,
            messages_out=described.messages_out,
            connected_since=described.connected_since,
            vhost=self.broker.host_name(connection) or DEFAULT_HOST,
        )

    # -- destinations ------------------------------------------------------------------

    def destinations(self) -> list[DestinationInfo]:
        """:returns: every queue, durable subscription and topic with traffic, by name."""
        here = self._engine.queues_here()
        found = [self._queue_info(name, queue) for name, queue in here]
        names = {name for name, _ in here}
        view = self._engine.cluster()
        if view is not None:
            # Queues with no handle here live in the engine's server, for other nodes.
            found.extend(
                DestinationInfo(
                    destination=name,
                    kind="queue",
                    depth=count + view.depth(name),
                    in_flight=view.in_flight(name),
                    consumers=view.consumers(name),
                )
                for name, count in view.unread.items()
                if name.startswith(QUEUE_PREFIX) and name not in names
            )
        found.extend(
            self._queue_info(durable_key(durable), queue)
            for durable, queue in self._engine.durables_here()
        )
        found.extend(
            self._topic_info(name)
            for name in self.broker.traffic.destinations
            if name.startswith(TOPIC_PREFIX) and not is_wildcard(name)
        )
        found.extend(
            self._stream_info(name, stream) for name, stream in self._engine.stream_logs().items()
        )
        found.sort(key=lambda info: info.destination)
        return found

    def destination(self, name: str) -> DestinationInfo:
        """
        :returns: one destination, with its consumers.
        :raises UnknownDestination: if it is not known now.
        """
        if name.startswith(TOPIC_PREFIX):
            if name not in self.broker.traffic.destinations or is_wildcard(name):
                raise UnknownDestination(f"no topic {name!r} has had messages")
            return self._topic_info(name, detail=True)
        if name.startswith(STREAM_PREFIX):
            stream = self._engine.stream_logs().get(name)
            if stream is None:
                raise UnknownDestination(f"no stream {name!r} has been used")
            return self._stream_info(name, stream, detail=True)
        return self._queue_info(name, self.queues.find(name), detail=True)

    def _queue_info(self, name: str, queue: Any, detail: bool = False) -> DestinationInfo:
        durable = name.startswith("durable:")
        if durable:
            kind = "durable"
        elif name.startswith(QUEUE_PREFIX):
            kind = "queue"
        else:
            kind = "temp-queue"
        depth = queue.depth()
        in_flight = sum(held_unacked(consumer) for consumer in queue.consumers)
        consumers = len(queue.consumers)
        view = self._engine.cluster()
        if view is not None:
            # The cluster's: what waits unread in the server, and what other nodes
            # hold (they count a durable subscription's under its pattern only).
            depth += view.unread.get(name, 0)
            if not durable:
                depth += view.depth(name)
                in_flight += view.in_flight(name)
                consumers += view.consumers(name)
        return DestinationInfo(
            destination=name,
            kind=kind,
            depth=depth,
            in_flight=in_flight,
            consumers=consumers,
            pattern=queue.destination if durable else None,
            subscribers=tuple(self._consumers(queue.consumers)) if detail else (),
        )

    def _topic_info(self, name: str, detail: bool = False) -> DestinationInfo:
        consumers: list[ConsumerInfo] = []
        in_flight = count = 0
        for queue, subscriber in self._engine.topic_subscriptions(name).members:
            if queue:
                count += len(subscriber.consumers)
                in_flight += sum(len(consumer.unacked) for consumer in subscriber.consumers)
                consumers.extend(self._consumers(subscriber.consumers))
            else:
                count += 1
                consumers.append(
                    ConsumerInfo(
                        connection_id(subscriber.connection),
                        subscriber.subscription_id,
                        subscriber.ack_mode,
                        0,
                        None,
                    )
                )
        return DestinationInfo(
            destination=name,
            kind="topic",
            depth=0,
            in_flight=in_flight,
            consumers=count,
            subscribers=tuple(consumers) if detail else (),
        )

    def _stream_info(self, name: str, stream: Any, detail: bool = False) -> DestinationInfo:
        """
        A stream: its depth is the messages it keeps, in this process or, with
        the redis engine, in the server (as of the engine's latest reading).
        """
        consumers = [reader.consumer for reader in stream.attached if reader.consumer is not None]
        view = self._engine.cluster()
        kept = StreamRange.of(stream) or (view.streams.get(name) if view is not None else None)
        return DestinationInfo(
            destination=name,
            kind="stream",
            depth=kept.messages if kept is not None else 0,
            in_flight=sum(len(consumer.unacked) for consumer in consumers),
            consumers=len(consumers),
            subscribers=tuple(self._consumers(consumers)) if detail else (),
            stream=kept,
        )

    @staticmethod
    def _consumers(consumers: Iterable[Any]) -> list[ConsumerInfo]:
        return [
            ConsumerInfo(
                connection_id(consumer.subscriber.connection),
                consumer.subscriber.subscription_id,
                consumer.subscriber.ack_mode,
                held_unacked(consumer),
                None if consumer.auto else consumer.window,
            )
            for consumer in consumers
        ]

    # -- publishing, nodes -------------------------------------------------------------

    def publish(self, destination: str, body: bytes, headers: Headers = ()) -> Message:
        """
        Publish a message as a client's SEND would be published.

        :returns: the routed message.
        :raises InvalidRequest: for a destination a SEND may not name, one of a
            single connection (:func:`check_publish_target`), or a malformed
            ``expires`` header.
        """
        check_publish_target(destination)
        try:
            routed: Message = self.broker.publish(destination, body, headers)
        except (InvalidDestination, MalformedFrame) as error:
            raise InvalidRequest(error.detail) from None
        return routed

    def subscribers(self, name: str) -> list[Any]:
        """
        :returns: who subscribes to ``name`` (as their SUBSCRIBE named it), on
            every node, oldest first: the broker's presence
            (:class:`~stompbroker.broker.features.presence.Present` records).
        """
        found: list[Any] = self.broker.presence.subscribers(name)
        return found

    def members(self, name: str) -> list[Any]:
        """
        :returns: the members of ``name`` (users, and anonymous connections),
            on every node, oldest first
            (:class:`~stompbroker.broker.features.presence.Member` records).
        """
        found: list[Any] = self.broker.presence.members(name)
        return found

    def memory_alarm(self) -> Any:
        """:returns: the watermark's :class:`~stompbroker.broker.flow.backpressure.MemoryAlarm`."""
        return self.broker.memory_alarm()

    def disk_alarm(self) -> Any:
        """:returns: the :class:`~stompbroker.broker.flow.disk_alarm.DiskAlarm`."""
        return self.broker.disk_alarm()

    def nodes(self) -> Any:
        """
        :returns: the broker processes sharing the engine, a list of
            :class:`~stompbroker.broker.engine.engine_interface.Node` (this one alone, locally),
            or a Deferred firing with one (the redis engine asks its server).
        """
        return self._engine.nodes()
