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
  (:mod:`stompbroker.broker.detached_sessions`, :attr:`Management.detached`);
- destinations: list queues, durable subscriptions and the topics that have
  had traffic, describe one with its consumers, browse (peek at) a queue's
  waiting messages, purge them, delete a queue or a durable subscription, move
  or copy messages to another destination, and send a dead-letter queue's
  messages back to where they were first sent (their ``original-destination``
  header, which :mod:`stompbroker.broker.dead_letters` sets);
- publish a message, as :meth:`~stompbroker.broker.service.Broker.publish` does;
- the nodes that share the engine.

The records it answers with and the exceptions it refuses with are in
:mod:`stompbroker.broker.management_records`.

Names: a connection is known by its session id (the ``session`` header of its
CONNECTED frame), or by its address before it has one.  A durable subscription
is known by its store key, ``durable:["CLIENT-ID","NAME"]``
(:func:`~stompbroker.broker.persistence.durable_key`), since neither its
client-id nor its name is a destination.  Only messages waiting for a consumer
are browsed, purged or moved: those delivered and not yet acknowledged belong
to their consumers until settled, as in RabbitMQ.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from stompbroker.broker.dead_letters import DEAD_LETTER_HEADERS
from stompbroker.broker.destinations import (
    QUEUE_PREFIX,
    REPLY_QUEUE_PREFIX,
    STREAM_PREFIX,
    TOPIC_PREFIX,
    is_dead_letter_queue,
    validate_queue,
)
from stompbroker.broker.detached_sessions import DetachedSessions
from stompbroker.broker.management_records import (
    ConnectionInfo,
    ConsumerInfo,
    DestinationInfo,
    InUse,
    InvalidRequest,
    SubscriptionInfo,
    UnknownConnection,
    UnknownDestination,
)
from stompbroker.broker.persistence import durable_key, parse_durable_key
from stompbroker.broker.queues import WorkerQueue
from stompbroker.broker.subscriptions import is_wildcard, validate_destination
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
]

log = logger("stompbroker.broker.management")

#: Most messages one browse, move or retry may take.
MAX_COUNT = 10_000


def connection_id(connection: Any) -> str:
    """:returns: how the management API names a connection (see the module notes)."""
    return str(connection.session_id or connection.peer)


def check_count(count: int) -> int:
    """
    :returns: ``count``, if it is between 1 and :data:`MAX_COUNT`.
    :raises InvalidRequest: otherwise.
    """
    if not 1 <= count <= MAX_COUNT:
        raise InvalidRequest(f"count must be between 1 and {MAX_COUNT}, got {count}")
    return count


def check_target(destination: str) -> str:
    """
    Check where a move, copy or publish may send messages: a ``/queue/`` or a
    ``/topic/`` without wildcards.

    :raises InvalidRequest: for anything else, saying why.
    """
    try:
        if destination.startswith(QUEUE_PREFIX):
            validate_queue(destination)
        elif destination.startswith(TOPIC_PREFIX) and not is_wildcard(destination):
            validate_destination(destination)
        else:
            raise InvalidRequest(
                f"{destination!r} is not a /queue/ or /topic/ destination without wildcards"
            )
    except InvalidDestination as error:
        raise InvalidRequest(error.detail) from None
    return destination


class Management:
    """
    The operator's view of one broker, and what the operator may do to it.

    :param broker: the :class:`~stompbroker.broker.service.Broker`; its connections
        describe themselves (:meth:`~stompbroker.interfaces.IConnection.describe`)
        and list their subscriptions
        (:meth:`~stompbroker.interfaces.IConnection.subscribers`).
    """

    def __init__(self, broker: Any) -> None:
        self.broker = broker
        self._engine = broker.engine
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
        batches (:mod:`stompbroker.broker.traffic`), so that a connection's
        frames, bytes and messages out are up to date, as ``/stats`` makes them.
        """
        self.broker.traffic.report_deliveries(self.broker.topics)

    def close_connection(self, ident: str, reason: str = "") -> ConnectionInfo:
        """
        Close a connection: the client gets an ERROR "closed by an operator" (with
        ``reason`` in its body), then the connection closes, as at a shutdown.

        :returns: what it was just before.
        :raises UnknownConnection: if no open connection has the id ``ident``.
        """
        connection = self._find(ident)
        info = self._describe(connection)
        log.info("an operator closed connection {id} from {peer}", id=info.id, peer=info.peer)
        connection.fail(ClosedByOperator(reason))
        return info

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
        )

    # -- destinations ------------------------------------------------------------------

    def destinations(self) -> list[DestinationInfo]:
        """:returns: every queue, durable subscription and topic with traffic, by name."""
        found = [self._queue_info(name, queue) for name, queue in self._engine.queues.items()]
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
                if name.startswith(QUEUE_PREFIX) and name not in self._engine.queues
            )
        found.extend(
            self._queue_info(durable_key(durable), queue)
            for durable, queue in self._engine.durable.items()
        )
        found.extend(
            self._topic_info(name)
            for name in self._engine.traffic.destinations
            if name.startswith(TOPIC_PREFIX) and not is_wildcard(name)
        )
        found.extend(
            self._stream_info(name, stream) for name, stream in self._engine.streams.logs.items()
        )
        found.sort(key=lambda info: info.destination)
        return found

    def destination(self, name: str) -> DestinationInfo:
        """
        :returns: one destination, with its consumers.
        :raises UnknownDestination: if it is not known now.
        """
        if name.startswith(TOPIC_PREFIX):
            if name not in self._engine.traffic.destinations or is_wildcard(name):
                raise UnknownDestination(f"no topic {name!r} has had messages")
            return self._topic_info(name, detail=True)
        if name.startswith(STREAM_PREFIX):
            stream = self._engine.streams.logs.get(name)
            if stream is None:
                raise UnknownDestination(f"no stream {name!r} has been used")
            return self._stream_info(name, stream, detail=True)
        return self._queue_info(name, self._queue(name), detail=True)

    def _queue(self, name: str) -> Any:
        """
        :returns: the queue of a ``/queue/``, ``/reply-queue/`` or durable name.
        :raises UnknownDestination: if there is none now.
        :raises InvalidRequest: for a topic or an unknown kind of name.
        """
        durable = parse_durable_key(name)
        if durable is not None:
            queue = self._engine.durable.get(durable)
        elif name.startswith((QUEUE_PREFIX, REPLY_QUEUE_PREFIX)):
            queue = self._engine.queues.get(name)
        elif name.startswith(TOPIC_PREFIX):
            raise InvalidRequest(
                f"{name!r} is a topic, which holds no messages: its subscriptions' queues do"
                " (durable ones are listed by their durable: names)"
            )
        else:
            raise InvalidRequest(
                f"{name!r} is not a /queue/, /reply-queue/ or durable: destination"
            )
        if queue is None:
            raise UnknownDestination(
                f"no queue {name!r} now (a queue exists while it holds messages or has consumers)"
            )
        return queue

    def _queue_info(self, name: str, queue: Any, detail: bool = False) -> DestinationInfo:
        durable = name.startswith("durable:")
        if durable:
            kind = "durable"
        elif name.startswith(QUEUE_PREFIX):
            kind = "queue"
        else:
            kind = "temp-queue"
        depth = len(queue.pending)
        in_flight = sum(len(consumer.unacked) for consumer in queue.consumers)
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
        for subscriber in self._engine.topics.match(name):
            if isinstance(subscriber, WorkerQueue):
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
        """A stream: its depth is the messages it keeps (0 when a remote engine keeps them)."""
        consumers = [reader.consumer for reader in stream.attached if reader.consumer is not None]
        return DestinationInfo(
            destination=name,
            kind="stream",
            depth=stream.kept or 0,
            in_flight=sum(len(consumer.unacked) for consumer in consumers),
            consumers=len(consumers),
            subscribers=tuple(self._consumers(consumers)) if detail else (),
        )

    @staticmethod
    def _consumers(consumers: Iterable[Any]) -> list[ConsumerInfo]:
        return [
            ConsumerInfo(
                connection_id(consumer.subscriber.connection),
                consumer.subscriber.subscription_id,
                consumer.subscriber.ack_mode,
                len(consumer.unacked),
                None if consumer.auto else consumer.window,
            )
            for consumer in consumers
        ]

    # -- what waits in a queue ---------------------------------------------------------

    def browse(self, name: str, count: int) -> list[Message]:
        """
        :returns: the first ``count`` messages waiting in a queue, left there.
        :raises UnknownDestination: if there is no such queue now.
        :raises InvalidRequest: for a topic, or a count out of range.
        """
        check_count(count)
        return list(self._queue(name).browse(count))

    def purge(self, name: str) -> int:
        """
        Discard what waits in a queue (persistent messages leave the store).

        :returns: how many messages were discarded.
        :raises UnknownDestination: if there is no such queue now.
        """
        queue = self._queue(name)
        purged: int = queue.purge()
        log.info("an operator purged {count} messages from {name}", count=purged, name=name)
        return purged

    def delete(self, name: str) -> int:
        """
        Delete a queue or a durable subscription, with what waits in it.

        :returns: how many messages were discarded.
        :raises UnknownDestination: if there is no such queue now.
        :raises InUse: if someone consumes from it: close them (or their
            connections) first, so that no client loses messages it holds.
        """
        queue = self._queue(name)
        if queue.consumers:
            raise InUse(
                f"{name!r} has {len(queue.consumers)} consumers; it can be deleted once they"
                " have unsubscribed (or their connections are closed)"
            )
        durable = parse_durable_key(name)
        if durable is not None:
            discarded = len(queue.pending)
            self._engine.remove_durable(durable)
        else:
            discarded = queue.purge()
            self._engine.delete_queue(queue)
        log.info("an operator deleted {name} ({count} messages)", name=name, count=discarded)
        return discarded

    def move(self, name: str, to: str, count: int, copy: bool = False) -> int:
        """
        Move (or copy) the first ``count`` waiting messages of a queue to the end
        of another queue, or publish them to a topic, each as a new message.

        :returns: how many went.
        :raises UnknownDestination: if there is no such queue now.
        :raises InvalidRequest: for a bad target or count, or a queue moved to itself.
        """
        check_count(count)
        check_target(to)
        queue = self._queue(name)
        if to == name:
            raise InvalidRequest(f"{name!r} cannot be moved to itself")
        moved: int = self._engine.transfer(
            queue, count, lambda message: (to, message.headers), copy
        )
        log.info(
            "an operator {action} {count} messages from {name} to {to}",
            action="copied" if copy else "moved",
            count=moved,
            name=name,
            to=to,
        )
        return moved

    def retry_targets(self, name: str, count: int) -> set[str]:
        """
        :returns: where :meth:`retry` would send the first ``count`` messages of a
            dead-letter queue (the valid ``original-destination`` headers).
        :raises UnknownDestination: if there is no such queue now.
        :raises InvalidRequest: if it is not a dead-letter queue.
        """
        self._dead_letter_queue(name)
        targets = set()
        for message in self.browse(name, count):
            origin = _origin(message)
            if origin is not None:
                targets.add(origin)
        return targets

    def retry(self, name: str, count: int) -> tuple[int, int]:
        """
        Send the first ``count`` messages of a dead-letter queue back to the
        destinations they were first sent to (their ``original-destination``),
        without the dead-letter headers, as new messages.

        :returns: how many went back, and how many stayed (no valid
            ``original-destination``).
        :raises UnknownDestination: if there is no such queue now.
        :raises InvalidRequest: if it is not a dead-letter queue, or for a bad count.
        """
        check_count(count)
        queue = self._dead_letter_queue(name)
        considered = min(count, len(queue.pending))
        moved: int = self._engine.transfer(queue, count, _back_to_origin, False)
        log.info("an operator sent {count} dead letters from {name} back", count=moved, name=name)
        return moved, considered - moved

    def _dead_letter_queue(self, name: str) -> Any:
        prefix = self.broker.policy.dead_letter_prefix
        if not is_dead_letter_queue(name, prefix):
            raise InvalidRequest(
                f"{name!r} is not a dead-letter queue (those are /queue/{prefix}NAME)"
            )
        return self._queue(name)

    # -- publishing, nodes -------------------------------------------------------------

    def publish(self, destination: str, body: bytes, headers: Headers = ()) -> Message:
        """
        Publish a message as a client's SEND would be published.

        :returns: the routed message.
        :raises InvalidRequest: for a destination other than a ``/queue/`` or a
            ``/topic/`` without wildcards, or a malformed ``expires`` header.
        """
        check_target(destination)
        try:
            routed: Message = self.broker.publish(destination, body, headers)
        except (InvalidDestination, MalformedFrame) as error:
            raise InvalidRequest(error.detail) from None
        return routed

    def nodes(self) -> Any:
        """
        :returns: the broker processes sharing the engine, a list of
            :class:`~stompbroker.broker.engine.base.Node` (this one alone, locally),
            or a Deferred firing with one (the redis engine asks its server).
        """
        return self._engine.nodes()


def _origin(message: Message) -> str | None:
    """:returns: a dead letter's valid ``original-destination``, or ``None``."""
    for header, value in message.headers:
        if header == "original-destination":
            try:
                return check_target(value)
            except InvalidRequest:
                return None
    return None


def _back_to_origin(message: Message) -> tuple[str, Headers] | None:
    """Route a dead letter back where it came from, without the dead-letter headers."""
    origin = _origin(message)
    if origin is None:
        return None
    headers = tuple(pair for pair in message.headers if pair[0] not in DEAD_LETTER_HEADERS)
    return origin, headers
