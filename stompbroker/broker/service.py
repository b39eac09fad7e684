"""
The broker: the one service every listener of a process feeds.

:class:`Broker` owns the destinations and the registry of connections.  It never
sees bytes or transports: sessions reach it through
:class:`stompbroker.interfaces.IBroker`, and it reaches them through the
:class:`stompbroker.interfaces.ISubscriber` objects they subscribe with.

Routing a SEND costs one lookup in the :class:`SubscriptionTree` (cached per
destination) and one ``deliver`` call per matching subscription; nothing on
that path logs, raises or creates a Deferred.
"""

from __future__ import annotations

import itertools
import secrets
from typing import Any, Iterable, Optional

from attrs import frozen
from twisted.application.service import Service
from twisted.internet.interfaces import IReactorTime
from stompbroker.logs import logger
from zope.interface import implementer

from stompbroker.broker.subscriptions import (
    SubscriptionTree,
    validate_destination,
    validate_pattern,
)
from stompbroker.interfaces import IBroker
from stompbroker.message import Message
from stompbroker.protocol.errors import InvalidDestination, LimitExceeded
from stompbroker.protocol.frames import Headers

log = logger("stompbroker.broker")

TOPIC_PREFIX = "/topic/"


@frozen
class Limits:
    """
    Broker-wide limits.

    :ivar max_connections: most connections open at once; 0 means no limit.
    """

    max_connections: int = 0


@implementer(IBroker)
class Broker(Service):
    """
    A STOMP broker, as a Twisted service.

    :param clock: the reactor (or a ``task.Clock``) that times the broker's work.
    :param limits: broker-wide :class:`Limits`.
    """

    name = "broker"

    def __init__(self, clock: IReactorTime, *, limits: Limits = Limits()) -> None:
        self.clock = clock
        self.limits = limits
        self.connections: set[Any] = set()
        self.topics = SubscriptionTree()
        self._node = secrets.token_hex(4)
        self._message_ids = itertools.count(1)
        self._session_ids = itertools.count(1)

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

    def close_connection(self, connection: Any) -> None:
        """Forget a connection."""
        self.connections.discard(connection)

    def new_session_id(self) -> str:
        """:returns: a broker-unique session id."""
        return f"session-{self._node}-{next(self._session_ids)}"

    # -- subscriptions ---------------------------------------------------------

    def subscribe(self, subscriber: Any) -> None:
        """
        Deliver matching messages to ``subscriber`` from now on.

        :raises InvalidDestination: for a destination the broker does not serve.
        """
        destination = subscriber.destination
        if not destination.startswith(TOPIC_PREFIX):
            raise self._unknown(destination)
        validate_pattern(destination)
        self.topics.add(destination, subscriber)

    def unsubscribe(self, subscriber: Any) -> None:
        """Stop delivering to ``subscriber``; unknown ones are ignored."""
        self.topics.remove(subscriber.destination, subscriber)

    # -- publishing ------------------------------------------------------------

    def send(self, destination: str, headers: Headers, body: bytes) -> Message:
        """
        Route one message to every matching subscription.

        :raises InvalidDestination: for a wildcard or an unknown kind of destination.
        """
        if not destination.startswith(TOPIC_PREFIX):
            raise self._unknown(destination)
        validate_destination(destination)
        message = Message(destination, f"{self._node}-{next(self._message_ids)}", headers, body)
        for subscriber in self.topics.match(destination):
            subscriber.deliver(message)
        return message

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

        :param destination: e.g. ``/topic/prices``.
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

    @staticmethod
    def _unknown(destination: str) -> InvalidDestination:
        return InvalidDestination(
            "unknown destination",
            f"{destination!r} is not a destination this broker serves; use /topic/NAME",
        )
