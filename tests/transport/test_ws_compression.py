"""
permessage-deflate (RFC 7692): what the server accepts of an offer, and the frames
it compresses; the whole handshake and a compressed exchange with Autobahn's own
client over an in-memory connection.
"""

from __future__ import annotations

import zlib
from typing import Any

import pytest
from autobahn.twisted.websocket import WebSocketClientFactory, WebSocketClientProtocol
from autobahn.websocket.compress import (
    PerMessageDeflate,
    PerMessageDeflateOffer,
    PerMessageDeflateResponse,
    PerMessageDeflateResponseAccept,
)
from twisted.internet.address import IPv4Address
from twisted.internet.task import Clock
from twisted.test import iosim

from stompbroker.broker.service import Broker
from stompbroker.protocol.session import SessionConfig
from stompbroker.transport.websocket import StompWebSocketFactory, WebSocketConfig
from stompbroker.transport.ws_compression import Compression, Deflater
from stompbroker.transport.ws_frames import OPCODE_TEXT, server_frame
from tests.support.tcp import NO_WATERMARK

ON = Compression(enabled=True, min_size=64, window_bits=10, mem_level=4)


def test_offers_are_declined_unless_compression_is_on() -> None:
    """Off by default: the client's offer is declined and messages go uncompressed."""
    assert Compression().accept([PerMessageDeflateOffer()], 1000) is None


def test_the_client_is_asked_for_the_configured_window_when_it_allows() -> None:
    """A client offering client_max_window_bits is asked to use at most window_bits."""
    accept = ON.accept([PerMessageDeflateOffer(accept_max_window_bits=True)], 1000)
    assert accept is not None
    # The server's own smaller window needs no word: any inflater reads it.
    assert accept.get_extension_string() == "permessage-deflate; client_max_window_bits=10"
    assert (accept.window_bits, accept.mem_level, accept.max_message_size) == (10, 4, 1000)


def test_a_smaller_window_the_client_asks_for_is_used() -> None:
    """A client asking for server_max_window_bits below ours gets its own (RFC 7692 7.1.2.1)."""
    accept = ON.accept([PerMessageDeflateOffer(request_max_window_bits=9)], 1000)
    assert accept is not None
    assert accept.window_bits == 9


@pytest.mark.parametrize(
    ("settings", "complaint"),
    [
        ({"window_bits": 8}, "window_bits"),
        ({"window_bits": 16}, "window_bits"),
        ({"mem_level": 0}, "mem_level"),
        ({"min_size": -1}, "0 bytes or more"),
    ],
)
def test_settings_out_of_range_are_refused(settings: dict[str, int], complaint: str) -> None:
    """Window bits 9-15, memory level 1-9, a minimum size of 0 or more."""
    with pytest.raises(ValueError, match=complaint):
        Compression(**settings)  # type: ignore[arg-type]


def inflater() -> Any:
    decompressor = zlib.decompressobj(-10)
    return lambda data: decompressor.decompress(data + b"\x00\x00\xff\xff")


def deflater(min_size: int = 64) -> Deflater:
    deflate = PerMessageDeflate(True, False, False, 10, 10, 4)
    return Deflater(deflate, min_size, server_frame)


def test_short_messages_go_uncompressed() -> None:
    """Below min_size the frame is server_frame's, RSV1 clear (RFC 7692 section 6)."""
    assert deflater().frame(b"\n", OPCODE_TEXT) == server_frame(b"\n", OPCODE_TEXT)


@pytest.mark.parametrize("size", [100, 2000, 70_000])
def test_long_messages_are_compressed_with_rsv1_and_the_context_carries_over(size: int) -> None:
    """Each frame sets RSV1 and inflates to its payload, the zlib context kept across messages."""
    frames = deflater()
    inflate = inflater()
    payloads = [
        (b'{"symbol":"EUR","bid":1.08}' * (size // 27 + 1))[:size] + bytes([i]) for i in range(3)
    ]
    sizes = []
    for payload in payloads:
        frame = frames.frame(payload, OPCODE_TEXT)
        assert frame[0] == 0x80 | 0x40 | OPCODE_TEXT
        length = frame[1]
        header = 2 if length < 126 else 4 if length == 126 else 10
        if length >= 126:
            length = int.from_bytes(frame[2:header], "big")
        assert len(frame) == header + length
        assert inflate(frame[header:]) == payload
        sizes.append(length)
    assert sizes[1] < sizes[0]


# -- the handshake and a compressed exchange, with Autobahn's client -----------------------


class Recorder(WebSocketClientProtocol):
    def onOpen(self) -> None:
        self.messages: list[bytes] = []
        self.sendMessage(b"CONNECT\naccept-version:1.2\nhost:/\n\n\x00")

    def onMessage(self, payload: bytes, isBinary: bool) -> None:
        self.messages.append(payload)


def exchange(compression: Compression, offer: bool = True) -> tuple[Recorder, Any]:
    """Connect Autobahn's client to the broker's WebSocket factory in memory."""
    clock = Clock()
    server = StompWebSocketFactory(
        Broker(clock, limits=NO_WATERMARK),
        clock,
        SessionConfig(heartbeat=(0, 0)),
        WebSocketConfig(ping_interval=0, ping_timeout=0, compression=compression),
    )
    client = WebSocketClientFactory("ws://127.0.0.1/ws", protocols=["v12.stomp"], reactor=clock)
    client.protocol = Recorder
    if offer:
        client.setProtocolOptions(
            perMessageCompressionOffers=[PerMessageDeflateOffer(accept_max_window_bits=True)],
            perMessageCompressionAccept=lambda r: (
                PerMessageDeflateResponseAccept(r)
                if isinstance(r, PerMessageDeflateResponse)
                else None
            ),
        )
    address = IPv4Address("TCP", "127.0.0.1", 40000)
    server_protocol = server.buildProtocol(address)
    client_protocol = client.buildProtocol(address)
    pump = iosim.connect(
        server_protocol,
        iosim.makeFakeServer(server_protocol),
        client_protocol,
        iosim.makeFakeClient(client_protocol),
    )
    pump.flush()
    return client_protocol, pump


def publish_and_read(client: Recorder, pump: Any, body: bytes) -> bytes:
    client.sendMessage(b"SUBSCRIBE\nid:0\ndestination:/topic/t\n\n\x00")
    client.sendMessage(b"SEND\ndestination:/topic/t\n\n" + body + b"\x00\n")
    pump.flush()
    [message] = [m for m in client.messages if m.startswith(b"MESSAGE")]
    return message


def test_autobahns_client_negotiates_deflate_and_reads_compressed_messages() -> None:
    """The client's offer is accepted, and a long MESSAGE arrives compressed and intact."""
    client, pump = exchange(ON)
    assert [type(e).__name__ for e in client.websocket_extensions_in_use] == ["PerMessageDeflate"]
    body = b'{"symbol":"EUR","bid":1.08,"ask":1.09}' * 40
    message = publish_and_read(client, pump, body)
    assert message.endswith(body + b"\x00\n")
    stats = client.trafficStats
    assert stats.incomingOctetsWireLevel < stats.incomingOctetsAppLevel / 4


def test_without_compression_the_offer_is_declined() -> None:
    """Compression off: no extension, and the same MESSAGE arrives as plain text."""
    client, pump = exchange(Compression())
    assert client.websocket_extensions_in_use == []
    body = b'{"a":1}' * 100
    assert publish_and_read(client, pump, body).endswith(body + b"\x00\n")
