"""
What the operator's operations (:mod:`stompbroker.broker.management.operations`) answer
with, and how they refuse: plain attrs records and one exception per kind of
refusal, which the web layer turns into JSON and HTTP statuses.
"""

from __future__ import annotations

from attrs import frozen

from stompbroker.broker.engine.node_figures import StreamRange
from stompbroker.broker.management.detached_sessions import DetachedSessionInfo

__all__ = [
    "ConnectionInfo",
    "ConsumerInfo",
    "DestinationInfo",
    "InUse",
    "InvalidRequest",
    "SubscriptionInfo",
    "UnknownConnection",
    "UnknownDestination",
    "UserSessions",
]


class UnknownConnection(LookupError):
    """No open connection has that id."""


class UnknownDestination(LookupError):
    """No queue, durable subscription or topic of that name is known now."""


class InUse(Exception):
    """The destination is being consumed, so deleting it would pull messages from clients."""


class InvalidRequest(ValueError):
    """An operation the broker cannot do as asked: a bad destination, count or target."""


@frozen
class SubscriptionInfo:
    """
    One subscription of a connection.

    :ivar id: the SUBSCRIBE's ``id``.
    :ivar destination: the destination or pattern subscribed to.
    :ivar ack: ``auto``, ``client`` or ``client-individual``.
    :ivar in_flight: messages delivered to it and not yet acknowledged.
    :ivar durable: the durable subscription it consumes (its key), or ``None``.
    """

    id: str
    destination: str
    ack: str
    in_flight: int
    durable: str | None


@frozen
class ConnectionInfo:
    """
    One client connection.

    :ivar id: its session id, or its address before CONNECTED.
    :ivar peer: the client's ``HOST:PORT``.
    :ivar login: the user it logged in as; ``None`` when anonymous.
    :ivar transport: ``tcp``, ``tls``, ``ws`` or ``wss``.
    :ivar version: the STOMP version, ``None`` before CONNECTED.
    :ivar subscriptions: its subscriptions.
    :ivar frames_in: frames received (every SEND is one).
    :ivar frames_out: frames sent (every MESSAGE is one).
    :ivar bytes_in: bytes received.
    :ivar bytes_out: bytes sent.
    :ivar messages_in: messages it published (SEND).
    :ivar messages_out: messages delivered to it (MESSAGE).
    :ivar connected_since: when it connected, in clock seconds.
    :ivar vhost: the virtual host it works in (``/``: the default host).
    """

    id: str
    peer: str
    login: str | None
    transport: str
    version: str | None
    subscriptions: tuple[SubscriptionInfo, ...]
    frames_in: int
    frames_out: int
    bytes_in: int
    bytes_out: int
    messages_in: int
    messages_out: int
    connected_since: float
    vhost: str = "/"


@frozen
class ConsumerInfo:
    """
    One subscription taking from a destination.

    :ivar connection: its connection's id.
    :ivar subscription: its SUBSCRIBE's ``id``.
    :ivar ack: its acknowledgement mode.
    :ivar in_flight: messages it holds unacknowledged.
    :ivar window: most it may hold (``None`` for ``auto``).
    """

    connection: str
    subscription: str
    ack: str
    in_flight: int
    window: int | None


@frozen
class DestinationInfo:
    """
    One destination now.

    :ivar destination: its name (a durable subscription's key, see the module notes).
    :ivar kind: ``queue``, ``temp-queue``, ``durable``, ``topic`` or ``stream``.
    :ivar depth: messages waiting for a consumer.
    :ivar in_flight: messages delivered and not yet acknowledged.
    :ivar consumers: subscriptions taking from it.
    :ivar pattern: a durable subscription's topic pattern; ``None`` otherwise.
    :ivar subscribers: the consumers, in a description of one destination;
        empty in a list.
    :ivar stream: a stream's retained range, when this process keeps the stream
        (the local engine); ``None`` otherwise.
    """

    destination: str
    kind: str
    depth: int
    in_flight: int
    consumers: int
    pattern: str | None = None
    subscribers: tuple[ConsumerInfo, ...] = ()
    stream: StreamRange | None = None


@frozen
class UserSessions:
    """
    One user's sessions on this node: what an application's backend lists,
    or closes to log the user out everywhere.

    :ivar login: the user.
    :ivar connections: its open connections.
    :ivar detached: its resumable sessions waiting for their client.
    """

    login: str
    connections: tuple[ConnectionInfo, ...]
    detached: tuple[DetachedSessionInfo, ...]
