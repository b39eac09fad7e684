"""
WebSocket clients for tests, built by hand from RFC 6455 so that they can send
what no real client would: frames (:func:`client_frame`, with knobs to break
them), opening handshakes (:func:`handshake_request`), and the parsing of what
a server answers; :class:`Client`, one connection to the adapter over a string
transport; and :class:`RawWebSocket`, a blocking client on a real socket.

The opcodes and the accept GUID are those of :mod:`benchmarks.websocket`.
"""

from __future__ import annotations

import base64
import hashlib
import socket
import ssl
import struct
import time

from twisted.internet.address import IPv4Address
from twisted.internet.task import Clock
from twisted.internet.testing import StringTransport, StringTransportWithDisconnection

from benchmarks.websocket import (
    ACCEPT_GUID,
    OPCODE_BINARY,
    OPCODE_CLOSE,
    OPCODE_CONTINUATION,
    OPCODE_PING,
    OPCODE_PONG,
    OPCODE_TEXT,
)
from stompbroker.broker.service import Broker
from stompbroker.protocol.frames import Frame
from stompbroker.protocol.parser import FrameParser
from stompbroker.protocol.session import SessionConfig
from stompbroker.transport.websocket import StompWebSocketFactory, WebSocketConfig

__all__ = [
    "ACCEPT_GUID",
    "CLIENT_KEY",
    "CONNECT",
    "NO_PINGS",
    "OPCODE_BINARY",
    "OPCODE_CLOSE",
    "OPCODE_CONTINUATION",
    "OPCODE_PING",
    "OPCODE_PONG",
    "OPCODE_TEXT",
    "QUIET",
    "Client",
    "RawWebSocket",
    "SocketLikeTransport",
    "UnclosedTransport",
    "client_frame",
    "close_payload",
    "expected_accept",
    "handshake_request",
    "make_factory",
    "server_frames",
    "split_response",
    "split_server_frames",
]

CLIENT_KEY = base64.b64encode(b"stompbroker-test").decode()

CONNECT = b"CONNECT\naccept-version:1.2\nhost:/\n\n\x00"


# -- RFC 6455 by hand ---------------------------------------------------------


def client_frame(
    payload: bytes,
    opcode: int = OPCODE_TEXT,
    fin: bool = True,
    mask: bytes = b"\x37\xfa\x21\x3d",
    length: int | None = None,
) -> bytes:
    """
    One masked client-to-server frame (RFC 6455 section 5.2).

    :param length: the payload length to announce, when it must differ from the
        payload's (to announce a message too large without building it).
    """
    announced = len(payload) if length is None else length
    header = bytes([(0x80 if fin else 0) | opcode])
    if announced < 126:
        header += bytes([0x80 | announced])
    elif announced < 1 << 16:
        header += bytes([0x80 | 126]) + struct.pack("!H", announced)
    else:
        header += bytes([0x80 | 127]) + struct.pack("!Q", announced)
    masked = bytes(byte ^ mask[index % 4] for index, byte in enumerate(payload))
    return header + mask + masked


def close_payload(code: int) -> bytes:
    return struct.pack("!H", code)


def split_server_frames(data: bytes) -> tuple[list[tuple[int, bytes]], bytes]:
    """
    Split what a server sent into ``(opcode, payload)`` pairs; server frames are unmasked.

    :returns: the complete frames, and the bytes of an incomplete one at the end.
    """
    frames = []
    position = 0
    while len(data) - position >= 2:
        start = position
        opcode = data[position] & 0x0F
        length = data[position + 1] & 0x7F
        position += 2
        if length == 126:
            if len(data) - position < 2:
                return frames, data[start:]
            (length,) = struct.unpack_from("!H", data, position)
            position += 2
        elif length == 127:
            if len(data) - position < 8:
                return frames, data[start:]
            (length,) = struct.unpack_from("!Q", data, position)
            position += 8
        if position + length > len(data):
            return frames, data[start:]
        frames.append((opcode, data[position : position + length]))
        position += length
    return frames, data[position:]


def server_frames(data: bytes) -> list[tuple[int, bytes]]:
    """:returns: the frames in ``data``, which must end at a frame boundary."""
    frames, rest = split_server_frames(data)
    assert rest == b"", "truncated frame"
    return frames


def handshake_request(
    path: str = "/ws",
    protocols: str | None = "v12.stomp, v11.stomp, v10.stomp",
    version: str = "13",
    method: str = "GET",
    host: str = "127.0.0.1",
    upgrade: bool = True,
    headers: tuple[tuple[str, str], ...] = (),
) -> bytes:
    """
    An opening handshake (RFC 6455 section 4.1), with knobs to break it.

    :param headers: more header lines, such as ``Authorization``.
    """
    lines = [f"{method} {path} HTTP/1.1", f"Host: {host}"]
    if upgrade:
        lines += ["Upgrade: websocket", "Connection: Upgrade"]
    lines += [f"Sec-WebSocket-Key: {CLIENT_KEY}", f"Sec-WebSocket-Version: {version}"]
    if protocols is not None:
        lines.append(f"Sec-WebSocket-Protocol: {protocols}")
    lines += [f"{name}: {value}" for name, value in headers]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("ascii")


def expected_accept() -> str:
    digest = hashlib.sha1(CLIENT_KEY.encode("ascii") + ACCEPT_GUID).digest()
    return base64.b64encode(digest).decode("ascii")


def split_response(data: bytes) -> tuple[int, dict[str, str], bytes]:
    """
    :returns: an HTTP response's status code, headers (lower-case names) and the bytes after them.
    """
    head, _, rest = data.partition(b"\r\n\r\n")
    status, *lines = head.decode("latin-1").split("\r\n")
    headers = {}
    for line in lines:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return int(status.split()[1]), headers, rest


# -- an in-memory connection ---------------------------------------------------


class SocketLikeTransport(StringTransportWithDisconnection):
    """A string transport that, like a real one, lets a protocol unregister no producer."""

    def unregisterProducer(self) -> None:
        self.producer = None


class UnclosedTransport(SocketLikeTransport):
    """
    A transport whose connection stays open after ``loseConnection``, as a socket's does until
    flushed.
    """

    def loseConnection(self) -> None:
        self.disconnecting = True


class Client:
    """One WebSocket connection to the adapter, over a string transport."""

    def __init__(
        self,
        factory: StompWebSocketFactory,
        protocols: str | None = "v12.stomp, v11.stomp, v10.stomp",
        transport: StringTransport | None = None,
        port: int = 40000,
        headers: tuple[tuple[str, str], ...] = (),
    ) -> None:
        self.protocol = factory.buildProtocol(IPv4Address("TCP", "127.0.0.1", port))
        address = IPv4Address("TCP", "127.0.0.1", port)
        self.transport = transport or SocketLikeTransport(peerAddress=address)
        self.transport.protocol = self.protocol
        self.protocol.makeConnection(self.transport)
        self.protocol.dataReceived(handshake_request(protocols=protocols, headers=headers))
        self.response = self.take()
        self.status, self.headers, rest = split_response(self.response)
        self.pending = rest
        self.parser = FrameParser(max_frame_size=1 << 30)

    def take(self) -> bytes:
        data = self.transport.value()
        self.transport.clear()
        return data

    def send(self, payload: bytes, opcode: int = OPCODE_TEXT, fin: bool = True) -> None:
        self.protocol.dataReceived(client_frame(payload, opcode, fin))

    def received(self) -> list[tuple[int, bytes]]:
        """The WebSocket frames the server sent since the last call."""
        data, self.pending = self.pending + self.take(), b""
        return server_frames(data)

    def stomp(self, frames: list[tuple[int, bytes]]) -> list[Frame]:
        """The STOMP frames carried by data messages among ``frames``."""
        data = b"".join(p for opcode, p in frames if opcode in (OPCODE_TEXT, OPCODE_BINARY))
        return self.parser.receive_data(data)

    def connect(self, connect: bytes = CONNECT) -> Frame:
        self.send(connect)
        [connected] = self.stomp(self.received())
        return connected

    @property
    def open(self) -> bool:
        return not self.transport.disconnecting and getattr(self.transport, "connected", True)


#: No heart-beats and no pings unless a test asks for them.
QUIET = SessionConfig(heartbeat=(0, 0))
NO_PINGS = WebSocketConfig(ping_interval=0, ping_timeout=0)


def make_factory(
    clock: Clock,
    broker: Broker | None = None,
    config: SessionConfig = QUIET,
    websocket: WebSocketConfig = NO_PINGS,
) -> StompWebSocketFactory:
    return StompWebSocketFactory(broker or Broker(clock), clock, config, websocket)


# -- on a real socket -----------------------------------------------------------


class RawWebSocket:
    """
    A blocking WebSocket client on a plain (or TLS) socket, for bytes no real client would send.

    :param address: the web port.
    :param request: the opening handshake to send, as bytes.
    :param tls: wrap the socket in TLS with this context first.
    :param source: the local address to connect from.
    """

    def __init__(
        self,
        address: tuple[str, int],
        request: bytes = handshake_request(),
        tls: ssl.SSLContext | None = None,
        source: str | None = None,
    ) -> None:
        bind = None if source is None else (source, 0)
        raw = socket.create_connection(address, timeout=5, source_address=bind)
        self.socket = tls.wrap_socket(raw, server_hostname=address[0]) if tls else raw
        self.socket.sendall(request)
        self.buffer = b""
        while b"\r\n\r\n" not in self.buffer:
            data = self.socket.recv(65536)
            if not data:
                break
            self.buffer += data
        self.status, self.headers, self.buffer = split_response(self.buffer)
        self.parser = FrameParser(max_frame_size=1 << 30)

    def send(self, payload: bytes, opcode: int = OPCODE_TEXT) -> None:
        self.socket.sendall(client_frame(payload, opcode))

    def _complete_frames(self) -> list[tuple[int, bytes]]:
        complete, self.buffer = split_server_frames(self.buffer)
        return complete

    def _receive(self, deadline: float) -> bool:
        """Read more bytes; :returns: ``False`` once the server closed or time ran out."""
        self.socket.settimeout(max(0.01, deadline - time.monotonic()))
        try:
            data = self.socket.recv(65536)
        except (TimeoutError, ConnectionResetError):
            return False
        self.buffer += data
        return bool(data)

    def read_frames(self, timeout: float = 5.0) -> list[tuple[int, bytes]]:
        """
        Read WebSocket frames until a close frame arrives, the server closes, or time runs out.
        """
        frames: list[tuple[int, bytes]] = []
        deadline = time.monotonic() + timeout
        while True:
            frames.extend(self._complete_frames())
            if any(opcode == OPCODE_CLOSE for opcode, _ in frames) or not self._receive(deadline):
                return frames + self._complete_frames()

    def stomp(self, frames: list[tuple[int, bytes]]) -> list[Frame]:
        """:returns: the STOMP frames carried by the data messages among ``frames``."""
        data = b"".join(p for opcode, p in frames if opcode in (OPCODE_TEXT, OPCODE_BINARY))
        return self.parser.receive_data(data)

    def read_stomp(self, count: int, timeout: float = 5.0) -> list[Frame]:
        """Read until ``count`` STOMP frames have arrived, the server closes, or time runs out."""
        received: list[Frame] = []
        deadline = time.monotonic() + timeout
        while True:
            received.extend(self.stomp(self._complete_frames()))
            if len(received) >= count or not self._receive(deadline):
                return received + self.stomp(self._complete_frames())

    def closed_by_peer(self, timeout: float = 5.0) -> bool:
        """:returns: whether the server ends the TCP connection within ``timeout``."""
        self.socket.settimeout(timeout)
        try:
            while self.socket.recv(65536):
                continue
        except TimeoutError:
            return False
        except ConnectionResetError:
            return True
        return True

    def close(self) -> None:
        self.socket.close()
