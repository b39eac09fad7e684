"""
One STOMP client connection of the load generator, over TCP or WebSocket.

:class:`Link` does the blocking set-up (TCP connect, the WebSocket upgrade,
CONNECT/CONNECTED, SUBSCRIBE with a receipt) and then hands its socket to the
worker's own loop: :meth:`Link.pack` turns STOMP frames into what goes on the
wire and :meth:`Link.decode` turns what came off it back into a STOMP stream.
Over TCP both are nearly free; over WebSocket they add the RFC 6455 framing.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager

from attrs import frozen

from benchmarks import websocket
from benchmarks.errors import BenchmarkError, BrokerRefused, HandshakeFailed
from benchmarks.wire import (
    Headers,
    command_of,
    connect_frame,
    error_text,
    header_of,
    split_frames,
    subscribe_frame,
)


@frozen
class Endpoint:
    """
    How to reach a broker.

    :ivar host: its address for STOMP over TCP.
    :ivar port: its STOMP port.
    :ivar ws_url: its STOMP-over-WebSocket endpoint (``ws://HOST:PORT/PATH``), if any.
    :ivar login: user name for CONNECT, if the broker wants one.
    :ivar passcode: password for CONNECT.
    :ivar vhost: CONNECT's ``host`` header.
    """

    host: str
    port: int
    ws_url: str | None = None
    login: str | None = None
    passcode: str | None = None
    vhost: str = "/"


def parse_address(text: str) -> tuple[str, int]:
    """
    :param text: ``HOST:PORT``.
    :returns: the host and the port.
    :raises ValueError: when it is not of that form.
    """
    host, _, port = text.rpartition(":")
    if not host or not port.isdigit():
        raise ValueError(f"expected HOST:PORT, got {text!r}")
    return host.strip("[]"), int(port)


class Link:
    """
    A client connection, blocking during set-up; the workers then drive its socket.

    :param endpoint: the broker.
    :param websocket_transport: speak STOMP over the endpoint's WebSocket URL.
    :param timeout: bound on each blocking step of the set-up, in seconds.
    :param wait: wait for CONNECTED now; with ``False`` the caller calls
        :meth:`expect_connected` later, so that many connections can be opened
        in one round trip.
    :raises HandshakeFailed: when connecting, the WebSocket upgrade or CONNECT fails.
    :raises BrokerRefused: when the broker answers CONNECT with ERROR.

    :ivar version: the STOMP version the broker chose, once CONNECTED.
    """

    def __init__(
        self,
        endpoint: Endpoint,
        websocket_transport: bool = False,
        timeout: float = 10.0,
        wait: bool = True,
    ) -> None:
        self.decoder: websocket.FrameDecoder | None = None
        self.version = "1.0"
        self._stream = b""
        if websocket_transport:
            if endpoint.ws_url is None:
                raise HandshakeFailed("no WebSocket URL given for this broker")
            host, port, _ = websocket.parse_url(endpoint.ws_url)
        else:
            host, port = endpoint.host, endpoint.port
        self.peer = f"{host}:{port}"
        try:
            self.sock = socket.create_connection((host, port), timeout=timeout)
        except OSError as error:
            raise HandshakeFailed(f"cannot connect to {self.peer}: {error}") from None
        with self._closed_on_failure():
            self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if endpoint.ws_url is not None and websocket_transport:
                websocket.handshake(self.sock, endpoint.ws_url)
                self.decoder = websocket.FrameDecoder()
            connect = connect_frame(endpoint.vhost, endpoint.login, endpoint.passcode)
            self.sock.sendall(self.pack([connect]))
        if wait:
            self.expect_connected(timeout)

    @contextmanager
    def _closed_on_failure(self) -> Iterator[None]:
        """Close the socket when set-up fails; socket errors become :class:`HandshakeFailed`."""
        try:
            yield
        except OSError as error:
            self.close()
            raise HandshakeFailed(f"{self.peer}: {error}") from None
        except BenchmarkError:
            self.close()
            raise

    def expect_connected(self, timeout: float) -> None:
        """
        Read the broker's answer to CONNECT.

        :raises HandshakeFailed: when it is not CONNECTED, or does not come in time.
        :raises BrokerRefused: when it is an ERROR.
        """
        with self._closed_on_failure():
            [connected] = self.read_frames(1, timeout)
            if command_of(connected) != b"CONNECTED":
                raise HandshakeFailed(f"expected CONNECTED, got {command_of(connected)!r}")
            self.version = header_of(connected, "version") or "1.0"

    def pack(self, frames: list[bytes]) -> bytes:
        """
        :param frames: encoded STOMP frames.
        :returns: the bytes to write: the frames, each in its own WebSocket message over WebSocket.
        """
        if self.decoder is None:
            return b"".join(frames)
        client_frame = websocket.client_frame
        return b"".join([client_frame(frame) for frame in frames])

    def decode(self, data: bytes) -> bytes:
        """
        :param data: bytes read from the socket.
        :returns: the STOMP stream they carry; over WebSocket, pongs owed are sent here.
        """
        decoder = self.decoder
        if decoder is None:
            return data
        stream = decoder.feed(data)
        if decoder.replies:
            replies, decoder.replies = decoder.replies, []
            self.sock.sendall(b"".join(replies))
        return stream

    def read_frames(self, count: int, timeout: float) -> list[bytes]:
        """
        Block until ``count`` frames arrive, for set-up only.

        :raises BrokerRefused: when one of them is an ERROR.
        :raises HandshakeFailed: when the connection closes or time runs out first.
        """
        frames: list[bytes] = []
        deadline = time.monotonic() + timeout
        while len(frames) < count:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise HandshakeFailed(f"{self.peer}: no answer from the broker within {timeout} s")
            self.sock.settimeout(remaining)
            try:
                data = self.sock.recv(65536)
            except TimeoutError:
                continue
            if not data:
                raise HandshakeFailed(f"{self.peer}: the broker closed the connection")
            complete, self._stream = split_frames(self._stream + self.decode(data))
            for frame in complete:
                if command_of(frame) == b"ERROR":
                    raise BrokerRefused(error_text(frame))
            frames.extend(complete)
        return frames

    def subscribe(
        self,
        destination: str,
        subscription_id: str,
        ack_mode: str,
        timeout: float,
        extra: Headers = (),
    ) -> None:
        """
        Subscribe and wait for the receipt, so that nothing published afterwards is missed.

        :raises BrokerRefused: when the broker answers with ERROR.
        :raises HandshakeFailed: when no receipt comes in time.
        """
        with self._closed_on_failure():
            self.sock.sendall(
                self.pack([subscribe_frame(destination, subscription_id, ack_mode, extra)])
            )
            self.read_frames(1, timeout)

    def buffered(self) -> bytes:
        """:returns: STOMP bytes read during set-up beyond the frames asked for (taken once)."""
        stream, self._stream = self._stream, b""
        return stream

    def __enter__(self) -> Link:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the socket, without a DISCONNECT: the broker must cope, and it is faster."""
        self.sock.close()
