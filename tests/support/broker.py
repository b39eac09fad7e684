"""
The real broker without sockets, and recording stand-ins for its other side.

- :class:`FakeConnection` and :class:`Inbox`: a client connection and a
  subscriber that keeps what it is given, as the broker sees them;
  :func:`message` makes a message for a queue;
- :class:`World`: a broker on a ``task.Clock`` with named fake connections and
  helpers to SEND, SUBSCRIBE, ACK and NACK through its ``IBroker`` API, and
  real sessions on it (:meth:`World.client`);
- :class:`Client`: one real session on a broker, frames in and frames out.

(:mod:`tests.support.session` is the other side: one session on a recording
broker.)
"""

from __future__ import annotations

from typing import Any

from twisted.internet.task import Clock
from zope.interface import implementer

from stompbroker.broker.queueing.delivery import DeliveryPolicy
from stompbroker.broker.service import Broker
from stompbroker.interfaces import ConnectionDescription, IConnection, ISubscriber
from stompbroker.protocol.encoder import encode
from stompbroker.protocol.frames import Frame
from stompbroker.protocol.message import Message
from stompbroker.protocol.parser import FrameParser
from stompbroker.protocol.session import SessionConfig, StompSession
from stompbroker.transport.peer_credentials import PeerCredentials

#: Where a :class:`World`'s clock starts: a plausible Unix time, for expiry headers.
EPOCH = 1_700_000_000.0

DEFAULT_POLICY = DeliveryPolicy()


@implementer(IConnection)
class FakeConnection:
    """A client connection as the broker sees it."""

    def __init__(self, session_id: str = "c1") -> None:
        self.session_id = session_id
        self.peer = "127.0.0.1:1"
        #: The errors :meth:`fail` was given, in order.
        self.failed: list[Any] = []
        #: Subscription id -> subscriber, for what :meth:`subscribers` lists.
        self.subscriptions: dict[str, Any] = {}

    def fail(self, error: Any) -> None:
        self.failed.append(error)

    def subscribers(self) -> tuple[Any, ...]:
        """:returns: the subscribers a test put in :attr:`subscriptions`."""
        return tuple(self.subscriptions.values())

    def end_subscription(self, subscription_id: str, reason: str) -> bool:
        """Forget the subscription a test put in :attr:`subscriptions` under that id."""
        return self.subscriptions.pop(subscription_id, None) is not None

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
        #: How often mark_gap was called.
        self.gaps = 0

    def deliver(self, message: Message) -> None:
        self.received.append(message)

    def count_deliveries(self, count: int, tails: dict[str, int]) -> None:
        self.counted.append((count, dict(tails)))

    def mark_gap(self) -> int:
        """Note the gap: the test reads ``gaps``."""
        self.gaps += 1
        return 1

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


class Client:
    """One session on the shared broker, with a transport that keeps what it writes."""

    def __init__(
        self,
        broker: Broker,
        clock: Clock,
        version: str = "1.2",
        config: SessionConfig | None = None,
        **connect: str,
    ) -> None:
        self.version = version
        self.output = bytearray()
        self.closed = False
        #: What the connection tells of the client: nothing, as on plain TCP.
        self.credentials = PeerCredentials(None)
        self.session = StompSession(broker, self, clock, config or SessionConfig())
        self.session.connection_made()
        headers = dict(connect)
        if version != "1.0":
            headers["accept-version"] = version
        self.send_frame("CONNECT", **headers)
        connected, *self.early = self.frames()
        assert connected.command == "CONNECTED"
        #: The CONNECTED frame; :attr:`early` the frames that came right after it.
        self.connected = connected

    def write(self, data: bytes) -> None:
        self.output += data

    def close(self) -> None:
        self.closed = True

    def kind(self) -> str:
        """What statistics call this transport: plain TCP."""
        return "tcp"

    def send_frame(
        self,
        command: str,
        body: bytes = b"",
        exact: tuple[tuple[str, str], ...] = (),
        **headers: str,
    ) -> None:
        """
        Send one frame; ``_`` in a keyword's name stands for ``-``, and ``exact``
        holds headers whose names are sent as they are (``AMQ_SCHEDULED_DELAY``).
        """
        pairs = tuple((name.replace("_", "-"), value) for name, value in headers.items())
        self.session.receive_data(encode(Frame(command, exact + pairs, body), self.version))

    def frames(self) -> list[Frame]:
        parser = FrameParser()
        parser.version = self.version
        data, self.output = bytes(self.output), bytearray()
        return parser.receive_data(data)

    def messages(self) -> list[Frame]:
        frames = self.frames()
        assert all(f.command == "MESSAGE" for f in frames), frames
        return frames

    def ack(self, message: Frame, command: str = "ACK", **headers: str) -> None:
        """Settle a message the way this client's protocol version does."""
        if self.version == "1.2":
            headers["id"] = message.get("ack") or ""
        else:
            headers["message_id"] = message.get("message-id") or ""
            if self.version == "1.1":
                headers["subscription"] = message.get("subscription") or ""
        self.send_frame(command, **headers)


class World:
    """
    A real broker on a ``task.Clock`` at :data:`EPOCH`, with fake connections
    that call its ``IBroker`` API, and real sessions (:meth:`client`).

    :param config: the settings of every client's session.
    :param options: more arguments for :class:`~stompbroker.broker.service.Broker`.
    """

    def __init__(
        self,
        policy: DeliveryPolicy = DEFAULT_POLICY,
        config: SessionConfig | None = None,
        **options: Any,
    ) -> None:
        self.clock = Clock()
        self.clock.advance(EPOCH)
        self.broker = Broker(self.clock, policy=policy, **options)
        self.connections: dict[str, FakeConnection] = {}
        self.config = config

    def client(self, version: str = "1.2", **connect: str) -> Client:
        """:returns: a new session on the broker, connected with ``connect``'s headers."""
        return Client(self.broker, self.clock, version, self.config, **connect)

    def connection(self, name: str = "c1") -> FakeConnection:
        if name not in self.connections:
            connection = self.connections[name] = FakeConnection(name)
            self.broker.open_connection(connection)
        return self.connections[name]

    def subscribe(
        self,
        destination: str = "/queue/q",
        ack_mode: str = "client-individual",
        *,
        on: str = "c1",
        **kwargs: Any,
    ) -> Inbox:
        inbox = Inbox(destination, ack_mode, connection=self.connection(on), **kwargs)
        self.broker.subscribe(inbox)
        return inbox

    def send(
        self, destination: str = "/queue/q", *bodies: bytes, headers: Any = (), **kwargs: Any
    ) -> None:
        for body in bodies:
            assert self.broker.send(destination, tuple(headers), body, **kwargs) is None

    def ack(self, inbox: Inbox, index: int = -1, **kwargs: Any) -> None:
        self.broker.ack(
            inbox.connection, inbox.received[index].message_id, subscriber=inbox, **kwargs
        )

    def nack(self, inbox: Inbox, index: int = -1, **kwargs: Any) -> None:
        self.broker.nack(
            inbox.connection, inbox.received[index].message_id, subscriber=inbox, **kwargs
        )

    def queue_bodies(self, destination: str) -> list[bytes]:
        return [message.body for message in self.broker.engine.queues[destination].pending]
