"""
A session on a list of bytes, with a recording broker: the other sides of a
:class:`~stompbroker.protocol.session.StompSession`, for tests that drive one
without sockets or a reactor.

- :class:`RecordingBroker` provides :class:`~stompbroker.interfaces.IBroker`: it
  records every call, and routes a SEND to the subscribers of exactly its
  destination.  With ``stores=True`` it answers SEND, ACK, NACK and COMMIT as a
  broker with a persistent store does, with a Deferred the test fires
  (:attr:`RecordingBroker.writes`).
- :class:`RecordingAccess` stands for access rules, recording what is checked.
- :class:`FakeTransport` provides :class:`~stompbroker.interfaces.ISessionTransport`:
  it keeps what the session writes, and whether it closed or paused reading.
- :func:`make_session` opens a session on them and a ``task.Clock``;
  :func:`connected` also completes its CONNECT; :func:`frame` encodes a client
  frame; :func:`subscribe` subscribes and returns the subscriber the broker got;
  :func:`error_of` reads the ERROR a session ended with.
"""

from __future__ import annotations

from typing import Any

from twisted.internet.defer import Deferred
from twisted.internet.task import Clock
from zope.interface import implementer

from stompbroker.interfaces import IBroker, ISessionTransport
from stompbroker.protocol.encoder import encode
from stompbroker.protocol.errors import AccessDenied, LimitExceeded
from stompbroker.protocol.frames import Frame
from stompbroker.protocol.message import Message
from stompbroker.protocol.parser import FrameParser
from stompbroker.protocol.session import SessionConfig, StompSession
from stompbroker.transport.peer_credentials import PeerCredentials

#: The settings a session gets unless a test says otherwise.
DEFAULT_CONFIG = SessionConfig()


@implementer(IBroker)
class RecordingBroker:
    """
    A broker that records what sessions ask and routes SENDs to exact-match subscribers.

    :param full: refuse every connection, as a broker at its connection limit does.
    :param stores: answer SEND, ACK, NACK and COMMIT with a Deferred, kept in
        :attr:`writes`, as for persistent messages; ``None`` (nothing to wait
        for) otherwise.
    """

    def __init__(self, full: bool = False, stores: bool = False) -> None:
        self.full = full
        self.stores = stores
        self.calls: list[tuple[str, Any]] = []
        self.subscribers: list[Any] = []
        self.connections: set[Any] = set()
        #: The store writes handed out, oldest first, for the test to fire.
        self.writes: list[Deferred[None]] = []
        #: The plain header lines each SEND was handed over with (or None).
        self.lines: list[bytes | None] = []
        self._ids = 0

    def _write(self) -> Deferred[None] | None:
        if not self.stores:
            return None
        write: Deferred[None] = Deferred()
        self.writes.append(write)
        return write

    def open_connection(self, connection: Any) -> None:
        if self.full:
            raise LimitExceeded("too many connections", "the broker is full")
        self.connections.add(connection)

    def close_connection(self, connection: Any) -> None:
        self.calls.append(("close_connection", connection))
        self.connections.discard(connection)

    def new_session_id(self) -> str:
        self._ids += 1
        return f"s{self._ids}"

    def select_host(self, connection: Any, header: str | None) -> None:
        """No virtual hosts: the session keeps calling this broker."""
        return None

    def subscribe(self, subscriber: Any) -> None:
        self.calls.append(("subscribe", subscriber))
        self.subscribers.append(subscriber)

    def unsubscribe(self, subscriber: Any) -> None:
        self.calls.append(("unsubscribe", subscriber))
        self.subscribers.remove(subscriber)

    def away(self, subscriber: Any) -> None:
        self.calls.append(("away", subscriber))

    def remove_durable(self, durable: tuple[str, str]) -> None:
        self.calls.append(("remove_durable", durable))

    def send(
        self,
        destination: str,
        headers: Any,
        body: bytes,
        *,
        connection: Any = None,
        transaction: str | None = None,
        lines: bytes | None = None,
    ) -> Deferred[None] | None:
        self._ids += 1
        self.lines.append(lines)
        message = Message(destination, f"m{self._ids}", headers if lines is None else lines, body)
        self.calls.append(("send", message))
        if transaction is not None:
            self.calls.append(("send-in", (transaction, message)))
            return self._write()
        for subscriber in self.subscribers:
            if subscriber.destination == destination:
                subscriber.deliver(message)
        return self._write()

    def ack(
        self, connection: Any, message_id: str, *, subscriber: Any = None, transaction: Any = None
    ) -> Deferred[None] | None:
        self.calls.append(("ack", (message_id, subscriber, transaction)))
        return self._write()

    def nack(
        self,
        connection: Any,
        message_id: str,
        *,
        subscriber: Any = None,
        requeue: bool = True,
        transaction: Any = None,
    ) -> Deferred[None] | None:
        self.calls.append(("nack", (message_id, subscriber, requeue, transaction)))
        return self._write()

    def begin(self, connection: Any, transaction: str) -> None:
        self.calls.append(("begin", transaction))

    def commit(self, connection: Any, transaction: str) -> Deferred[None] | None:
        self.calls.append(("commit", transaction))
        return self._write()

    def abort(self, connection: Any, transaction: str) -> None:
        self.calls.append(("abort", transaction))

    def pause_consumers(self, connection: Any) -> None:
        self.calls.append(("pause_consumers", connection))

    def resume_consumers(self, connection: Any) -> None:
        self.calls.append(("resume_consumers", connection))

    def slow_consumer(self, destinations: Any, policy: str, buffer: int) -> tuple[str, int]:
        return policy, buffer

    def block_sender(self, subscriber: Any) -> None:
        self.calls.append(("block_sender", subscriber))

    def count_dropped(self, connection: Any, count: int, disconnected: bool = False) -> None:
        self.calls.append(("count_dropped", (count, disconnected)))

    def named(self, call: str) -> list[Any]:
        """:returns: the arguments of every recorded call of that name, in order."""
        return [argument for name, argument in self.calls if name == call]


class RecordingAccess:
    """
    Access rules that record each check and refuse one destination
    (``SessionConfig.access``, as :class:`stompbroker.security.access_file.AccessControl`).

    :param refused: the destination every right is refused on.
    """

    def __init__(self, refused: str) -> None:
        self.refused = refused
        #: ``(identity, right, destination)`` of each check, in order.
        self.checks: list[tuple[Any, str, str]] = []

    def check(self, identity: Any, right: str, destination: str) -> None:
        self.checks.append((identity, right, destination))
        if destination == self.refused:
            raise AccessDenied(right, destination)


#: What a plain TCP connection tells of its client: no token, no certificate.
PLAIN_TCP = PeerCredentials(None)


@implementer(ISessionTransport)
class FakeTransport:
    """
    Collects what a session writes, and whether it closed or stopped reading.

    :param credentials: what the connection tells of the client; by default
        those of a plain TCP connection: no token, no certificate.
    """

    def __init__(self, credentials: PeerCredentials = PLAIN_TCP) -> None:
        self.credentials = credentials
        self.data = bytearray()
        self.closed = False
        self.reading = True

    def write(self, data: bytes) -> None:
        self.data += data

    def close(self) -> None:
        self.closed = True

    def pause_reading(self) -> None:
        self.reading = False

    def resume_reading(self) -> None:
        self.reading = True

    def kind(self) -> str:
        return "tcp"

    def take(self) -> bytes:
        """:returns: what was written since the last take, which is forgotten."""
        data, self.data = bytes(self.data), bytearray()
        return data

    def frames(self, version: str = "1.2") -> list[Frame]:
        """:returns: the frames written since the last take, parsed as ``version``."""
        parser = FrameParser()
        parser.version = version
        return parser.receive_data(self.take())


def make_session(
    broker: RecordingBroker | None = None,
    config: SessionConfig = DEFAULT_CONFIG,
    credentials: PeerCredentials = PLAIN_TCP,
) -> tuple[StompSession, FakeTransport, Clock, RecordingBroker]:
    """
    :param credentials: what the connection tells of the client below STOMP.
    :returns: a session whose connection was just made, its transport, clock and broker.
    """
    broker = broker or RecordingBroker()
    transport = FakeTransport(credentials)
    clock = Clock()
    session = StompSession(broker, transport, clock, config, peer="127.0.0.1:5000")
    session.connection_made()
    return session, transport, clock, broker


def frame(
    command: str, *headers: tuple[str, str], body: bytes = b"", version: str = "1.2"
) -> bytes:
    """:returns: a client frame, encoded for ``version``."""
    return encode(Frame(command, tuple(headers), body), version)


def connected(
    version: str = "1.2",
    heart_beat: str = "0,0",
    config: SessionConfig = DEFAULT_CONFIG,
    broker: RecordingBroker | None = None,
    client_id: str | None = None,
) -> tuple[StompSession, FakeTransport, Clock, RecordingBroker]:
    """
    As :func:`make_session`, past a CONNECT of ``version`` (its CONNECTED taken),
    with ``client-id`` when given one.
    """
    session, transport, clock, broker = make_session(broker, config=config)
    headers = [("host", "/"), ("heart-beat", heart_beat)]
    if client_id is not None:
        headers.append(("client-id", client_id))
    if version != "1.0":
        headers.insert(0, ("accept-version", version))
    session.receive_data(frame("CONNECT", *headers))
    [reply] = transport.frames()
    assert reply.command == "CONNECTED", reply
    return session, transport, clock, broker


def subscribe(
    session: StompSession, transport: FakeTransport, *headers: tuple[str, str], version: str = "1.2"
) -> Any:
    """SUBSCRIBE, and return the subscription the broker was given."""
    session.receive_data(frame("SUBSCRIBE", *headers, version=version))
    assert not transport.closed, transport.frames(version)
    return session.broker.subscribers[-1]


def error_of(transport: FakeTransport, version: str = "1.2") -> Frame:
    """:returns: the ERROR frame written last, after checking the transport was closed."""
    frames = transport.frames(version)
    assert frames and frames[-1].command == "ERROR", frames
    assert transport.closed
    return frames[-1]
