"""
Sessions on a real in-process :class:`~stompbroker.broker.service.Broker`, without
sockets: :class:`World` is a broker on a ``task.Clock``, :class:`Client` one
connection to it that sends frames and reads back what the broker wrote.
"""

from __future__ import annotations

from typing import Any

from twisted.internet.task import Clock

from stompbroker.broker.queueing.delivery import DeliveryPolicy
from stompbroker.broker.service import Broker
from stompbroker.protocol.encoder import encode
from stompbroker.protocol.frames import Frame
from stompbroker.protocol.parser import FrameParser
from stompbroker.protocol.session import SessionConfig, StompSession


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
    """A real broker on a ``task.Clock``, and its clients."""

    def __init__(
        self,
        policy: DeliveryPolicy | None = None,
        config: SessionConfig | None = None,
        **options: Any,
    ) -> None:
        self.clock = Clock()
        self.broker = Broker(self.clock, policy=policy or DeliveryPolicy(), **options)
        #: The settings of every client's session.
        self.config = config

    def client(self, version: str = "1.2", **connect: str) -> Client:
        return Client(self.broker, self.clock, version, self.config, **connect)
