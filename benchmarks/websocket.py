"""
Just enough of an RFC 6455 client to carry STOMP, on the standard library.

The load generator must cost less than the broker it measures, so this is not a
general WebSocket client: it performs the opening handshake (section 4.1) with
``Sec-WebSocket-Protocol: v12.stomp, v11.stomp, v10.stomp``, sends each STOMP
frame as one masked text frame with a fresh random key (section 5.3), and turns
what the server sends back into the plain STOMP byte stream that
:class:`benchmarks.wire.Inbox` scans.  Fragmented messages are joined by
concatenation, which is exactly right for STOMP: the stream is what matters,
not where the server cut it.  Pings are answered; a close frame ends the stream.
"""

from __future__ import annotations

import base64
import hashlib
import os
import random
import socket
import struct
from urllib.parse import urlsplit

from benchmarks.errors import HandshakeFailed

#: Subprotocols offered, best first (STOMP over WebSocket convention).
SUBPROTOCOLS = ("v12.stomp", "v11.stomp", "v10.stomp")
#: RFC 6455 section 1.3: the GUID the server hashes with our key.
ACCEPT_GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

OPCODE_CONTINUATION = 0x0
OPCODE_TEXT = 0x1
OPCODE_BINARY = 0x2
OPCODE_CLOSE = 0x8
OPCODE_PING = 0x9
OPCODE_PONG = 0xA


def parse_url(url: str) -> tuple[str, int, str]:
    """
    Split a ``ws://`` URL.

    :param url: e.g. ``ws://127.0.0.1:15674/ws``.
    :returns: host, port and the request path (with its query).
    :raises ValueError: for another scheme; ``wss://`` is not supported, as TLS
        would measure the cipher rather than the broker.
    """
    parts = urlsplit(url)
    if parts.scheme != "ws" or not parts.hostname:
        raise ValueError(f"expected a ws://HOST:PORT/PATH URL, got {url!r}")
    path = parts.path or "/"
    if parts.query:
        path = f"{path}?{parts.query}"
    return parts.hostname, parts.port or 80, path


def handshake(sock: socket.socket, url: str) -> str:
    """
    Upgrade a connected socket to WebSocket (RFC 6455 section 4.1).

    :param sock: a blocking socket connected to the server in ``url``.
    :param url: the endpoint's ``ws://`` URL.
    :returns: the subprotocol the server chose.
    :raises HandshakeFailed: when the server does not answer 101 with the right
        ``Sec-WebSocket-Accept`` and one of our subprotocols.
    """
    host, port, path = parse_url(url)
    key = base64.b64encode(os.urandom(16))
    request = (
        f"GET {path} HTTP/1.1\r\n"
        f"Host: {host}:{port}\r\n"
        "Upgrade: websocket\r\n"
        "Connection: Upgrade\r\n"
        f"Sec-WebSocket-Key: {key.decode()}\r\n"
        "Sec-WebSocket-Version: 13\r\n"
        f"Sec-WebSocket-Protocol: {', '.join(SUBPROTOCOLS)}\r\n"
        "\r\n"
    )
    sock.sendall(request.encode("ascii"))
    response = b""
    while b"\r\n\r\n" not in response:
        chunk = sock.recv(4096)
        if not chunk:
            raise HandshakeFailed(f"{url}: connection closed during the WebSocket handshake")
        response += chunk
        if len(response) > 65536:
            raise HandshakeFailed(f"{url}: oversized handshake response")
    head, _, rest = response.partition(b"\r\n\r\n")
    if rest:
        # Our protocol speaks first (CONNECT), so the server has nothing to say yet.
        raise HandshakeFailed(f"{url}: unexpected bytes after the handshake response")
    lines = head.decode("latin-1").split("\r\n")
    status = lines[0].split(" ", 2)
    if len(status) < 2 or status[1] != "101":
        raise HandshakeFailed(f"{url}: server answered {lines[0]!r} instead of 101")
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    expected = base64.b64encode(hashlib.sha1(key + ACCEPT_GUID).digest()).decode()
    if headers.get("sec-websocket-accept") != expected:
        raise HandshakeFailed(f"{url}: wrong Sec-WebSocket-Accept")
    chosen = headers.get("sec-websocket-protocol", "")
    if chosen not in SUBPROTOCOLS:
        raise HandshakeFailed(f"{url}: server chose subprotocol {chosen!r}, not a STOMP one")
    return chosen


def _header(opcode: int, length: int, masked: bool) -> bytes:
    mask_bit = 0x80 if masked else 0
    first = 0x80 | opcode
    if length < 126:
        return struct.pack("!BB", first, mask_bit | length)
    if length < 65536:
        return struct.pack("!BBH", first, mask_bit | 126, length)
    return struct.pack("!BBQ", first, mask_bit | 127, length)


def client_frame(payload: bytes, opcode: int = OPCODE_TEXT) -> bytes:
    """
    Encode one masked client frame (RFC 6455 section 5.2 and 5.3).

    :param payload: the STOMP frame (or control payload).
    :param opcode: the frame's opcode; text by default.
    :returns: the wire bytes.
    """
    key = random.getrandbits(32).to_bytes(4, "big")
    return _header(opcode, len(payload), True) + key + unmask(payload, key)


def unmask(payload: bytes, key: bytes) -> bytes:
    """
    XOR a payload with a masking key (RFC 6455 section 5.3); its own inverse.

    The whole payload is XORed in one big-integer operation, at C speed.

    :param payload: the bytes to (un)mask.
    :param key: the 4-byte masking key.
    :returns: the (un)masked bytes, as long as ``payload``.
    """
    length = len(payload)
    if not length:
        return b""
    stream = (key * (length // 4 + 1))[:length]
    return (int.from_bytes(payload, "big") ^ int.from_bytes(stream, "big")).to_bytes(length, "big")


class FrameDecoder:
    """
    Turns the server's (unmasked) frames back into the STOMP byte stream.

    :ivar closed: whether the server sent a close frame.
    :ivar replies: control frames we owe the server (pongs), already encoded;
        the caller sends them and clears the list.
    """

    __slots__ = ("_pending", "closed", "replies")

    def __init__(self) -> None:
        self._pending = b""
        self.closed = False
        self.replies: list[bytes] = []

    def feed(self, data: bytes) -> bytes:
        """
        Decode what arrived.

        :param data: bytes read from the socket.
        :returns: the payload of every complete data frame, concatenated.
        """
        buffer = self._pending + data if self._pending else data
        size = len(buffer)
        position = 0
        payloads = []
        while size - position >= 2:
            first = buffer[position]
            length = buffer[position + 1] & 0x7F
            start = position + 2
            if length == 126:
                if size - start < 2:
                    break
                length = int.from_bytes(buffer[start : start + 2], "big")
                start += 2
            elif length == 127:
                if size - start < 8:
                    break
                length = int.from_bytes(buffer[start : start + 8], "big")
                start += 8
            key = b""
            if buffer[position + 1] & 0x80:
                # Servers must not mask (section 5.1); tolerate it all the same.
                key = buffer[start : start + 4]
                start += 4
            end = start + length
            if end > size:
                break
            payload = buffer[start:end]
            if key:
                payload = unmask(payload, key)
            opcode = first & 0x0F
            if opcode <= OPCODE_BINARY:
                payloads.append(payload)
            elif opcode == OPCODE_PING:
                self.replies.append(client_frame(payload, OPCODE_PONG))
            elif opcode == OPCODE_CLOSE:
                self.closed = True
            position = end
        self._pending = buffer[position:]
        if len(payloads) == 1:
            return payloads[0]
        return b"".join(payloads)
