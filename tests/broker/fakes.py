"""Recording stand-ins for the session side of the broker, for tests without sockets."""

from __future__ import annotations

from typing import Any

from zope.interface import implementer

from stompbroker.interfaces import ConnectionDescription, IConnection, ISubscriber
from stompbroker.protocol.message import Message


@implementer(IConnection)
class FakeConnection:
    """A client connection as the broker sees it."""

    def __init__(self, session_id: str = "c1") -> None:
        self.session_id = session_id
        self.peer = "127.0.0.1:1"

    def describe(self) -> ConnectionDescription:
        """It counts nothing: the default description (see IConnection.describe)."""
        return ConnectionDescription(session=self.session_id, address=self.peer)

    def __repr__(self) -> str:
        return f"<FakeConnection {self.session_id}>"


@implementer(ISubscriber)
class Inbox:
    """A subscriber that keeps what it is given, in order."""

    def __init__(
        self,
        destination: str = "/queue/q",
        ack_mode: str = "client-individual",
        *,
        subscription_id: str = "s",
        connection: Any = None,
        prefetch: int = 0,
        max_redeliveries: int | None = None,
        durable: tuple[str, str] | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        self.destination = destination
        self.headers = headers if headers is not None else {}
        self.ack_mode = ack_mode
        self.subscription_id = subscription_id
        self.connection = connection if connection is not None else FakeConnection()
        self.prefetch = prefetch
        self.max_redeliveries = max_redeliveries
        self.durable = durable
        self.received: list[Message] = []
        #: What count_deliveries was told: (count, tails) per call.
        self.counted: list[tuple[int, dict[str, int]]] = []

    def deliver(self, message: Message) -> None:
        self.received.append(message)

    def count_deliveries(self, count: int, tails: dict[str, int]) -> None:
        self.counted.append((count, dict(tails)))

    def bodies(self) -> list[bytes]:
        return [message.body for message in self.received]

    def take(self) -> list[Message]:
        """:returns: what arrived since the last call."""
        received, self.received = self.received, []
        return received

    def __repr__(self) -> str:
        return f"<Inbox {self.subscription_id}>"


def message(body: bytes = b"m", message_id: str | None = None, expires: float = 0.0) -> Message:
    """A message for a queue; its id defaults to its body."""
    return Message("/queue/q", message_id or body.decode(), (), body, expires)
