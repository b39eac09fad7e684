"""
A client of the TCP adapter over a string transport: the real adapter, session
and broker, with no socket.
"""

from __future__ import annotations

from typing import Any

from twisted.internet.address import IPv4Address
from twisted.internet.testing import StringTransportWithDisconnection

from stompbroker.broker.service import Limits
from stompbroker.protocol.encoder import encode
from stompbroker.protocol.frames import Frame
from stompbroker.protocol.parser import FrameParser

#: Limits without the memory watermark, which would measure the test process.
NO_WATERMARK = Limits(memory_high=0)


class Client:
    """
    One connection to the broker through the real TCP adapter, on a string transport.

    :param factory: the broker's protocol factory.
    :param host: the client's address.
    :param port: the client's port.
    :param transport_type: the string transport to use (one that records more).
    """

    def __init__(
        self,
        factory: Any,
        host: str = "127.0.0.1",
        port: int = 40000,
        transport_type: type[StringTransportWithDisconnection] = StringTransportWithDisconnection,
    ) -> None:
        address = IPv4Address("TCP", host, port)
        self.protocol = factory.buildProtocol(address)
        self.transport = transport_type(peerAddress=address)
        self.transport.protocol = self.protocol
        self.protocol.makeConnection(self.transport)
        self._parser = FrameParser(max_frame_size=1 << 30)

    @property
    def session(self) -> Any:
        return self.protocol.session

    @property
    def closed(self) -> bool:
        return not self.transport.connected

    def send(self, command: str, *headers: tuple[str, str], body: bytes = b"") -> None:
        """Send one frame."""
        self.protocol.dataReceived(encode(Frame(command, tuple(headers), body), "1.2"))

    def send_bytes(self, data: bytes) -> None:
        self.protocol.dataReceived(data)

    def connect(self, *headers: tuple[str, str]) -> Frame:
        """Send CONNECT; :returns: the broker's answer."""
        self.send("CONNECT", ("accept-version", "1.2"), ("host", "/"), *headers)
        [answer] = self.frames()
        return answer

    def frames(self) -> list[Frame]:
        """:returns: the frames written to the client since the last call."""
        data = self.transport.value()
        self.transport.clear()
        return self._parser.receive_data(data)

    def error(self) -> Frame:
        """:returns: the ERROR the broker ended the connection with."""
        frames = self.frames()
        assert frames and frames[-1].command == "ERROR", frames
        assert self.closed
        return frames[-1]
