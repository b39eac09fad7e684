"""
A small blocking STOMP 1.2 client: what a Spark task needs to read a stream or send rows.

Why not stomp.py: it runs a receiver thread that hands frames to listener
callbacks and reconnects by itself, while a partition reader is a generator
that pulls one message after another and must stop at an exact offset; a
pull client maps onto that directly (no thread, no queue between them, and
TCP itself holds the broker back while Spark is busy).  stomp.py also has no
WebSocket transport.  The STOMP part is a few dozen lines of framing; the
transports are the standard library's ``socket`` and ``ssl`` and, for
``ws://`` and ``wss://``, the ``websocket-client`` library (the ``spark`` extra).

URLs: ``stomp://HOST:PORT`` (plain TCP), ``stomp+ssl://HOST:PORT`` (TLS),
``ws://HOST:PORT/PATH`` and ``wss://HOST:PORT/PATH`` (STOMP over WebSocket,
subprotocol ``v12.stomp``, one frame per message).  Heart-beats are not
negotiated: a reader waits as long as its own timeout allows.
"""

from __future__ import annotations

import select
import socket
import ssl
import threading
from collections import deque
from collections.abc import Iterable
from typing import Any, Protocol
from urllib.parse import urlsplit

from attrs import define, field, frozen

DEFAULT_PORTS = {"stomp": 61613, "stomp+ssl": 61612, "ws": 15674, "wss": 15673}
_ESCAPES = {"\\\\": "\\", "\\n": "\n", "\\r": "\r", "\\c": ":"}


class StompConnectionError(Exception):
    """The broker could not be reached, or closed the connection, or did not answer in time."""


class StompBrokerError(Exception):
    """
    The broker answered with an ERROR frame.

    :ivar message: the ERROR's ``message`` header.
    :ivar receipt_id: its ``receipt-id`` header: the frame it refused, when it says.
    :ivar detail: its body, as text.
    """

    def __init__(self, message: str, receipt_id: str | None, detail: str) -> None:
        super().__init__(f"{message}: {detail}" if detail and detail != message else message)
        self.message = message
        self.receipt_id = receipt_id
        self.detail = detail


@frozen
class Frame:
    """One STOMP frame; ``headers`` keeps the first of a repeated header (STOMP 1.2)."""

    command: str
    headers: dict[str, str]
    body: bytes = b""


@frozen
class ConnectSettings:
    """
    Where and how to connect.

    :ivar url: see the module notes.
    :ivar login: CONNECT's ``login``.
    :ivar passcode: CONNECT's ``passcode``; a token (JWT) is sent here too.
    :ivar ca_file: PEM file of the CAs to trust for TLS (default: the system's).
    :ivar cert_file: a client certificate (PEM) for TLS, with ``key_file``.
    :ivar key_file: the client certificate's key (PEM).
    :ivar timeout: seconds to wait for the connection, CONNECTED, a RECEIPT.
    """

    url: str
    login: str | None = None
    passcode: str | None = None
    ca_file: str | None = None
    cert_file: str | None = None
    key_file: str | None = None
    timeout: float = 30.0


def parse_url(url: str) -> tuple[str, str, int, str]:
    """
    :returns: the scheme, host, port and path of a broker URL.
    :raises ValueError: for a scheme that is not one of :data:`DEFAULT_PORTS` or no host.
    """
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme not in DEFAULT_PORTS:
        raise ValueError(
            f"url must start with one of {', '.join(s + '://' for s in DEFAULT_PORTS)}: {url!r}"
        )
    if not parts.hostname:
        raise ValueError(f"url names no host: {url!r}")
    return scheme, parts.hostname, parts.port or DEFAULT_PORTS[scheme], parts.path or "/ws"


def _escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\r", "\\r").replace("\n", "\\n").replace(":", "\\c")


def _unescape(text: str) -> str:
    if "\\" not in text:
        return text
    out, index = [], 0
    while index < len(text):
        pair = text[index : index + 2]
        if pair in _ESCAPES:
            out.append(_ESCAPES[pair])
            index += 2
        else:
            out.append(text[index])
            index += 1
    return "".join(out)


def encode(command: str, headers: Iterable[tuple[str, str]], body: bytes = b"") -> bytes:
    """:returns: the frame's bytes; ``content-length`` is added, so bodies may hold NULs."""
    escape = (lambda text: text) if command == "CONNECT" else _escape
    lines = [command]
    lines += [f"{escape(name)}:{escape(value)}" for name, value in headers]
    lines.append(f"content-length:{len(body)}")
    return ("\n".join(lines) + "\n\n").encode("utf-8") + body + b"\x00"


@define
class FrameDecoder:
    """Bytes in, frames out; heart-beat line ends between frames are skipped."""

    _buffer: bytearray = field(factory=bytearray)

    def feed(self, data: bytes) -> list[Frame]:
        """:returns: the frames ``data`` completes."""
        self._buffer += data
        frames = []
        while True:
            frame = self._next()
            if frame is None:
                return frames
            frames.append(frame)

    def _next(self) -> Frame | None:
        buffer = self._buffer
        while buffer[:1] in (b"\n", b"\r"):
            del buffer[:1]
        end = buffer.find(b"\n\n")
        if end < 0:
            return None
        head = bytes(buffer[:end]).decode("utf-8").replace("\r\n", "\n").split("\n")
        headers: dict[str, str] = {}
        for line in head[1:]:
            name, _, value = line.partition(":")
            headers.setdefault(_unescape(name), _unescape(value))
        start = end + 2
        length = headers.get("content-length")
        if length is not None:
            stop = start + int(length)
            if len(buffer) < stop + 1:
                return None
        else:
            stop = buffer.find(b"\x00", start)
            if stop < 0:
                return None
        frame = Frame(head[0], headers, bytes(buffer[start:stop]))
        del buffer[: stop + 1]
        return frame


class Transport(Protocol):
    """What the client asks of a connection: bytes out, bytes in (``b""`` at the end)."""

    def send(self, data: bytes) -> None: ...
    def receive(self, timeout: float) -> bytes: ...
    def readable(self) -> bool: ...
    def close(self) -> None: ...


def _readable(sock: socket.socket) -> bool:
    """Whether ``sock`` has bytes (or its end) to read now, without waiting."""
    try:
        ready, _, _ = select.select([sock], [], [], 0)
    except (OSError, ValueError):
        return True
    return bool(ready)


@define
class SocketTransport:
    """A TCP or TLS socket."""

    sock: socket.socket

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def receive(self, timeout: float) -> bytes:
        self.sock.settimeout(timeout)
        return self.sock.recv(1 << 18)

    def readable(self) -> bool:
        if isinstance(self.sock, ssl.SSLSocket) and self.sock.pending():
            return True
        return _readable(self.sock)

    def close(self) -> None:
        self.sock.close()


@define
class WebSocketTransport:
    """A ``websocket-client`` connection: one STOMP frame per binary message."""

    ws: Any

    def send(self, data: bytes) -> None:
        self.ws.send_bytes(data)

    def receive(self, timeout: float) -> bytes:
        import websocket

        self.ws.settimeout(timeout)
        try:
            data = self.ws.recv()
        except websocket.WebSocketConnectionClosedException:
            return b""
        except websocket.WebSocketTimeoutException:
            raise TimeoutError from None
        return data.encode("utf-8") if isinstance(data, str) else bytes(data)

    def readable(self) -> bool:
        sock = self.ws.sock
        if sock is None:
            return True
        if isinstance(sock, ssl.SSLSocket) and sock.pending():
            return True
        return _readable(sock)

    def close(self) -> None:
        self.ws.close()


def _tls_context(settings: ConnectSettings) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=settings.ca_file)
    if settings.cert_file:
        context.load_cert_chain(settings.cert_file, settings.key_file)
    return context


def open_transport(settings: ConnectSettings) -> Transport:
    """
    :returns: a connected transport for ``settings.url``.
    :raises StompConnectionError: when the broker cannot be reached.
    """
    scheme, host, port, path = parse_url(settings.url)
    try:
        if scheme in ("ws", "wss"):
            import websocket

            options: dict[str, Any] = {}
            if scheme == "wss":
                options["sslopt"] = {"context": _tls_context(settings)}
            ws = websocket.create_connection(
                f"{scheme}://{host}:{port}{path}",
                timeout=settings.timeout,
                subprotocols=["v12.stomp"],
                **options,
            )
            return WebSocketTransport(ws)
        sock = socket.create_connection((host, port), timeout=settings.timeout)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if scheme == "stomp+ssl":
            sock = _tls_context(settings).wrap_socket(sock, server_hostname=host)
        return SocketTransport(sock)
    except (OSError, ValueError) as error:
        raise StompConnectionError(f"cannot connect to {settings.url}: {error}") from None
    except Exception as error:  # websocket-client's handshake errors have no common base
        raise StompConnectionError(f"cannot connect to {settings.url}: {error}") from None


class StompClient:
    """
    One connection to the broker, used from one thread.

    :param transport: a connected :class:`Transport`.
    :param timeout: seconds :meth:`expect` waits by default.
    """

    def __init__(self, transport: Transport, timeout: float) -> None:
        self._transport = transport
        self._decoder = FrameDecoder()
        self._frames: deque[Frame] = deque()
        self.timeout = timeout

    @classmethod
    def connect(cls, settings: ConnectSettings) -> StompClient:
        """
        Open a connection and log in.

        :raises StompConnectionError: when unreachable, or no CONNECTED in time.
        :raises StompBrokerError: when the login is refused.
        """
        client = cls(open_transport(settings), settings.timeout)
        _, host, _, _ = parse_url(settings.url)
        headers = [("accept-version", "1.2"), ("host", host), ("heart-beat", "0,0")]
        if settings.login is not None:
            headers.append(("login", settings.login))
        if settings.passcode is not None:
            headers.append(("passcode", settings.passcode))
        try:
            client.send("CONNECT", headers)
            frame = client.receive(settings.timeout)
            if frame is None or frame.command != "CONNECTED":
                raise StompConnectionError(f"{settings.url} did not answer CONNECT in time")
        except BaseException:
            client.close()
            raise
        return client

    def send(self, command: str, headers: Iterable[tuple[str, str]], body: bytes = b"") -> None:
        """Send one frame."""
        try:
            self._transport.send(encode(command, headers, body))
        except OSError as error:
            raise StompConnectionError(f"connection lost: {error}") from None

    def receive(self, timeout: float | None = None) -> Frame | None:
        """
        :returns: the next frame, or ``None`` when none came within ``timeout``.
        :raises StompBrokerError: for an ERROR frame.
        :raises StompConnectionError: when the broker closed the connection.
        """
        wait = self.timeout if timeout is None else timeout
        while not self._frames:
            try:
                data = self._transport.receive(wait)
            except TimeoutError:
                return None
            except OSError as error:
                raise StompConnectionError(f"connection lost: {error}") from None
            if not data:
                raise StompConnectionError("the broker closed the connection")
            self._frames.extend(self._decoder.feed(data))
        frame = self._frames.popleft()
        if frame.command == "ERROR":
            raise StompBrokerError(
                frame.headers.get("message", "ERROR"),
                frame.headers.get("receipt-id"),
                frame.body.decode("utf-8", "replace").strip(),
            )
        return frame

    def has_news(self) -> bool:
        """
        Whether a frame (or the connection's end) waits to be read now: a writer
        reads what the broker said before it sends more, so that an ERROR the
        broker sent before closing is read before a SEND meets the closed socket.
        """
        return bool(self._frames) or self._transport.readable()

    def discard_news(self) -> None:
        """
        Read and drop what waits now (late messages of a closed subscription),
        without waiting for more.

        :raises StompConnectionError: when the broker closed the connection meanwhile.
        :raises StompBrokerError: when it sent an ERROR meanwhile.
        """
        self._frames.clear()
        while self._transport.readable():
            self.receive(self.timeout)
            self._frames.clear()

    def close(self) -> None:
        """Close without DISCONNECT: nothing this client sends needs the broker's last word."""
        try:
            self._transport.close()
        except OSError:
            pass


class ClientPool:
    """
    Connections kept open between uses, per :class:`ConnectSettings`.

    Spark runs a streaming query's tasks in Python workers it keeps between
    micro-batches: a task that gives its connection back here lets the next
    batch's task in the same worker read on it, instead of a connection (and a
    login, and a line in the broker's connection list) per partition per batch.
    A connection is checked when taken: one the broker closed meanwhile is
    dropped and another opened.
    """

    def __init__(self) -> None:
        self._idle: dict[ConnectSettings, list[StompClient]] = {}
        self._lock = threading.Lock()

    def take(self, settings: ConnectSettings) -> StompClient:
        """
        :returns: an idle connection of ``settings`` that still works, else a new one.
        :raises StompConnectionError, StompBrokerError: as :meth:`StompClient.connect`.
        """
        while True:
            with self._lock:
                idle = self._idle.get(settings)
                client = idle.pop() if idle else None
            if client is None:
                return StompClient.connect(settings)
            try:
                client.discard_news()
            except (StompConnectionError, StompBrokerError):
                client.close()
                continue
            return client

    def give(self, settings: ConnectSettings, client: StompClient) -> None:
        """Keep ``client``, which has no subscription left open, for the next :meth:`take`."""
        with self._lock:
            self._idle.setdefault(settings, []).append(client)

    def close(self) -> None:
        """Close every idle connection."""
        with self._lock:
            idle, self._idle = self._idle, {}
        for clients in idle.values():
            for client in clients:
                client.close()
