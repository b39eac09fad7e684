"""
Tests of the WebSocket adapter without sockets: hand-built RFC 6455 frames into
a ``StringTransport``, time from a ``task.Clock``, a real broker and session above.

The hand-built frames and the in-memory client are :mod:`tests.support.websocket`,
which the integration tests share.
"""

from __future__ import annotations

import struct

import pytest
from twisted.internet.address import IPv4Address
from twisted.internet.task import Clock

from stompbroker.broker.service import Broker, Limits
from stompbroker.protocol.session import SessionConfig
from stompbroker.transport.websocket import WebSocketConfig
from stompbroker.transport.ws_frames import server_frame
from tests.support.websocket import (
    CONNECT,
    OPCODE_BINARY,
    OPCODE_CLOSE,
    OPCODE_CONTINUATION,
    OPCODE_PING,
    OPCODE_PONG,
    OPCODE_TEXT,
    Client,
    SocketLikeTransport,
    UnclosedTransport,
    client_frame,
    close_payload,
    expected_accept,
    handshake_request,
    make_factory,
    split_response,
)

# -- handshake -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("offered", "chosen", "version"),
    [
        ("v12.stomp, v11.stomp, v10.stomp", "v12.stomp", "1.2"),
        ("v10.stomp, v12.stomp", "v12.stomp", "1.2"),
        ("v11.stomp, v10.stomp", "v11.stomp", "1.1"),
        ("v10.stomp", "v10.stomp", "1.0"),
        ("mqtt, v11.stomp", "v11.stomp", "1.1"),
    ],
)
def test_newest_offered_subprotocol_is_chosen_and_caps_the_version(
    clock: Clock, offered: str, chosen: str, version: str
) -> None:
    """
    The newest STOMP subprotocol offered wins, and the session speaks no newer version (STOMP 1.2,
    "Protocol Negotiation").
    """
    client = Client(make_factory(clock), protocols=offered)
    assert client.status == 101
    assert client.headers["sec-websocket-accept"] == expected_accept()
    assert client.headers["sec-websocket-protocol"] == chosen
    connected = client.connect(b"CONNECT\naccept-version:1.0,1.1,1.2\nhost:/\n\n\x00")
    assert connected.get("version") == version


def test_client_offering_no_subprotocol_is_served_as_on_tcp(clock: Clock) -> None:
    """
    Without Sec-WebSocket-Protocol the handshake succeeds and CONNECT's accept-version decides
    (1.2).
    """
    client = Client(make_factory(clock), protocols=None)
    assert client.status == 101
    assert "sec-websocket-protocol" not in client.headers
    assert client.connect().get("version") == "1.2"


def test_client_offering_only_other_subprotocols_gets_http_400(clock: Clock) -> None:
    """A handshake offering no STOMP subprotocol is refused with an HTTP error naming ours."""
    client = Client(make_factory(clock), protocols="mqtt, wamp.2.json")
    assert client.status == 400
    assert client.response.startswith(b"HTTP/1.1 400 no supported subprotocol offered")
    assert b"v12.stomp, v11.stomp, v10.stomp" in client.response
    assert not client.open


def test_subprotocols_follow_the_versions_the_listener_speaks(clock: Clock) -> None:
    """A listener configured for 1.2 only refuses a client that offers v10.stomp alone."""
    factory = make_factory(clock, config=SessionConfig(versions=("1.2",), heartbeat=(0, 0)))
    assert Client(factory, protocols="v10.stomp").status == 400
    accepted = Client(factory, protocols="v10.stomp, v12.stomp")
    assert accepted.headers["sec-websocket-protocol"] == "v12.stomp"


@pytest.mark.parametrize(
    ("request_bytes", "status"),
    [
        (handshake_request(upgrade=False), 426),
        (handshake_request(version="12"), 400),
        (handshake_request(method="POST"), 405),
    ],
)
def test_bad_handshake_gets_an_http_error(clock: Clock, request_bytes: bytes, status: int) -> None:
    """
    A request that is not a valid RFC 6455 upgrade gets an HTTP error status, then the connection
    closes.
    """
    factory = make_factory(clock)
    protocol = factory.buildProtocol(IPv4Address("TCP", "127.0.0.1", 1))
    transport = SocketLikeTransport()
    transport.protocol = protocol
    protocol.makeConnection(transport)
    protocol.dataReceived(request_bytes)
    code, _, body = split_response(transport.value())
    assert code == status
    assert b"Traceback" not in body
    assert not transport.connected


# -- messages in and out -------------------------------------------------------


@pytest.mark.parametrize("opcode", [OPCODE_TEXT, OPCODE_BINARY])
def test_server_answers_in_the_kind_the_client_used(clock: Clock, opcode: int) -> None:
    """A client that speaks in text messages hears text, one that speaks binary hears binary."""
    client = Client(make_factory(clock))
    client.send(CONNECT + b"SUBSCRIBE\nid:0\ndestination:/topic/a\nreceipt:r\n\n\x00", opcode)
    frames = client.received()
    assert [kind for kind, _ in frames] == [opcode, opcode]
    assert [f.command for f in client.stomp(frames)] == ["CONNECTED", "RECEIPT"]


def test_one_message_may_carry_many_frames_and_one_frame_many_messages(clock: Clock) -> None:
    """
    STOMP frames are a byte stream across WebSocket messages: batched and split frames both parse.
    """
    client = Client(make_factory(clock))
    client.connect()
    stream = b"SUBSCRIBE\nid:0\ndestination:/topic/a\n\n\x00SEND\ndestination:/topic/a\n\none\x00\n"
    stream += b"SEND\ndestination:/topic/a\n\ntwo\x00"
    client.send(stream[:5])
    client.send(stream[5:50])
    client.send(stream[50:])
    messages = client.stomp(client.received())
    assert [(f.command, f.body) for f in messages] == [("MESSAGE", b"one"), ("MESSAGE", b"two")]
    assert [f.get("subscription") for f in messages] == ["0", "0"]


def test_fragmented_message_is_fed_fragment_by_fragment(clock: Clock) -> None:
    """
    A message in several WebSocket fragments (RFC 6455 section 5.4) works, and needs no reassembly.
    """
    client = Client(make_factory(clock))
    client.send(CONNECT[:10], OPCODE_TEXT, fin=False)
    client.send(CONNECT[10:20], OPCODE_CONTINUATION, fin=False)
    assert client.received() == []
    client.send(CONNECT[20:], OPCODE_CONTINUATION, fin=False)
    [connected] = client.stomp(client.received())
    assert connected.command == "CONNECTED"
    client.send(b"", OPCODE_CONTINUATION, fin=True)
    assert client.open


def test_bodies_with_nul_cross_between_websocket_clients(clock: Clock) -> None:
    """
    A body with NUL bytes, framed by content-length, arrives intact (STOMP 1.2, "Header content-
    length").
    """
    factory = make_factory(clock)
    subscriber = Client(factory, port=1)
    publisher = Client(factory, port=2)
    subscriber.connect()
    publisher.connect()
    subscriber.send(b"SUBSCRIBE\nid:s\ndestination:/topic/bin\nreceipt:r\n\n\x00", OPCODE_BINARY)
    subscriber.received()
    body = b"\x00zero\x00\xff\xfe\x00"
    publisher.send(
        b"SEND\ndestination:/topic/bin\ncontent-length:%d\n\n%s\x00" % (len(body), body),
        OPCODE_BINARY,
    )
    [message] = subscriber.stomp(subscriber.received())
    assert message.body == body


def test_frame_that_is_not_utf8_goes_to_a_text_client_as_binary(clock: Clock) -> None:
    """
    RFC 6455 section 5.6 allows only UTF-8 in text messages, so a binary body travels in a binary
    one.
    """
    factory = make_factory(clock)
    subscriber = Client(factory, port=1)
    publisher = Client(factory, port=2)
    subscriber.connect()
    publisher.connect()
    subscriber.send(b"SUBSCRIBE\nid:s\ndestination:/topic/t\n\n\x00")
    publisher.send(b"SEND\ndestination:/topic/t\n\nh\xc3\xa9llo\x00")
    publisher.send(b"SEND\ndestination:/topic/t\ncontent-length:2\n\n\xff\x00\x00")
    frames = subscriber.received()
    assert [kind for kind, _ in frames] == [OPCODE_TEXT, OPCODE_BINARY]
    assert [f.body for f in subscriber.stomp(frames)] == ["héllo".encode(), b"\xff\x00"]


@pytest.mark.parametrize("length", [0, 1, 125, 126, 65535, 65536, 70000])
@pytest.mark.parametrize("binary", [False, True])
def test_adapter_frames_messages_as_autobahn_does(clock: Clock, length: int, binary: bool) -> None:
    """
    The adapter's own framing of outgoing messages is byte for byte Autobahn's, at every
    length encoding (RFC 6455 section 5.2).
    """
    client = Client(make_factory(clock))
    payload = bytes(index % 251 for index in range(length))
    client.protocol.sendMessage(payload, isBinary=binary)
    assert server_frame(payload, OPCODE_BINARY if binary else OPCODE_TEXT) == client.take()


# -- limits --------------------------------------------------------------------


def close_code(frames: list[tuple[int, bytes]]) -> int | None:
    for opcode, payload in frames:
        if opcode == OPCODE_CLOSE:
            return struct.unpack("!H", payload[:2])[0]
    return None


def test_message_over_the_limit_gets_error_then_close_1009(clock: Clock) -> None:
    """
    A message longer than one largest frame is refused from its header: ERROR, then close 1009.
    """
    broker = Broker(clock)
    factory = make_factory(clock, broker, SessionConfig(heartbeat=(0, 0), max_frame_size=100))
    client = Client(factory)
    client.connect()
    announced = client_frame(b"SEND\ndestination:/topic/a\n\n", length=102)
    client.protocol.dataReceived(announced)
    frames = client.received()
    [error] = client.stomp(frames)
    assert error.command == "ERROR"
    assert error.get("message") == "frame too large: more than 100 bytes"
    assert close_code(frames) == 1009
    client.protocol.dataReceived(client_frame(close_payload(1009), OPCODE_CLOSE))
    assert not client.open
    assert broker.connections == set()


def test_largest_frame_fits_in_one_message(clock: Clock) -> None:
    """A frame of exactly max_frame_size bytes, with its NUL, is accepted in one message."""
    factory = make_factory(clock, config=SessionConfig(heartbeat=(0, 0), max_frame_size=100))
    client = Client(factory)
    client.connect()
    head = b"SEND\ndestination:/topic/a\nreceipt:r\n\n"
    client.send(head + b"x" * (100 - len(head)) + b"\x00")
    [receipt] = client.stomp(client.received())
    assert receipt.command == "RECEIPT"


def test_frame_over_the_limit_across_messages_gets_error_then_close_1009(clock: Clock) -> None:
    """
    A frame too large, sent in small messages, is caught by the parser and ends with close 1009 too.
    """
    factory = make_factory(clock, config=SessionConfig(heartbeat=(0, 0), max_frame_size=100))
    client = Client(factory)
    client.connect()
    client.send(b"SEND\ndestination:/topic/a\n\n" + b"x" * 60)
    client.send(b"x" * 60)
    frames = client.received()
    [error] = client.stomp(frames)
    assert error.get("message", "").startswith("frame too large")
    assert close_code(frames) == 1009


def test_session_close_sends_close_1000_after_receipt(clock: Clock) -> None:
    """DISCONNECT gets its RECEIPT, then a normal close (STOMP 1.2, "DISCONNECT")."""
    broker = Broker(clock)
    client = Client(make_factory(clock, broker))
    client.connect()
    client.send(b"SUBSCRIBE\nid:0\ndestination:/topic/a\n\n\x00DISCONNECT\nreceipt:bye\n\n\x00")
    frames = client.received()
    [receipt] = client.stomp(frames)
    assert receipt.get("receipt-id") == "bye"
    assert frames[-1][0] == OPCODE_CLOSE and close_code(frames) == 1000
    assert len(broker.engine.topics) == 0


def test_full_broker_refuses_with_error_and_close(clock: Clock) -> None:
    """
    A WebSocket over max-connections gets an ERROR (as text) and a close, as a TCP client does.
    """
    factory = make_factory(clock, Broker(clock, limits=Limits(max_connections=1)))
    Client(factory, port=1)
    refused = Client(factory, port=2)
    frames = refused.received()
    assert frames[0][0] == OPCODE_TEXT
    [error] = refused.stomp(frames)
    assert error.get("message") == "too many connections"
    assert close_code(frames) == 1000


# -- closing -------------------------------------------------------------------


def test_client_close_releases_the_session(clock: Clock) -> None:
    """
    A close frame from the client is answered, and the broker forgets the connection and its
    subscriptions.
    """
    broker = Broker(clock)
    client = Client(make_factory(clock, broker))
    client.connect()
    client.send(b"SUBSCRIBE\nid:0\ndestination:/topic/a\n\n\x00")
    client.send(close_payload(1000), OPCODE_CLOSE)
    assert close_code(client.received()) == 1000
    assert not client.open
    assert broker.connections == set()
    assert len(broker.engine.topics) == 0


def test_deliveries_after_the_client_closed_are_dropped(clock: Clock) -> None:
    """
    Between the client's close frame and connectionLost, a delivery is dropped rather than raising.
    """
    broker = Broker(clock)
    transport = UnclosedTransport(peerAddress=IPv4Address("TCP", "127.0.0.1", 3))
    client = Client(make_factory(clock, broker), transport=transport)
    client.connect()
    client.send(b"SUBSCRIBE\nid:0\ndestination:/topic/a\n\n\x00")
    client.send(close_payload(1000), OPCODE_CLOSE)
    client.received()
    broker.publish("/topic/a", "too late")
    assert client.received() == []


# -- liveness ------------------------------------------------------------------


def test_server_pings_and_drops_a_client_that_does_not_answer(clock: Clock) -> None:
    """
    Pings go out every ping_interval; without a pong within ping_timeout the connection is dropped.
    """
    broker = Broker(clock)
    websocket = WebSocketConfig(ping_interval=1.0, ping_timeout=2.0)
    client = Client(make_factory(clock, broker, websocket=websocket))
    client.connect()
    clock.advance(1.0)
    assert [opcode for opcode, _ in client.received()] == [OPCODE_PING]
    clock.advance(1.9)
    assert client.open
    clock.advance(0.2)
    assert not client.open
    assert broker.connections == set()


def test_pongs_keep_a_client_alive(clock: Clock) -> None:
    """A client that answers every ping stays connected for as long as it answers."""
    websocket = WebSocketConfig(ping_interval=1.0, ping_timeout=1.0)
    client = Client(make_factory(clock, websocket=websocket))
    client.connect()
    for _ in range(10):
        clock.advance(1.0)
        [(opcode, payload)] = client.received()
        assert opcode == OPCODE_PING
        client.send(payload, OPCODE_PONG)
    assert client.open


def test_pongs_count_as_heart_beats(clock: Clock) -> None:
    """
    A pong counts as hearing from the client, so a throttled tab that answers pings keeps its
    session (STOMP 1.2, "Heart-beating").
    """
    config = SessionConfig(heartbeat=(0, 1000))
    websocket = WebSocketConfig(ping_interval=0.5, ping_timeout=0)
    client = Client(make_factory(clock, config=config, websocket=websocket))
    client.connect(b"CONNECT\naccept-version:1.2\nheart-beat:1000,0\n\n\x00")
    for _ in range(20):
        clock.advance(0.5)
        for opcode, payload in client.received():
            assert opcode == OPCODE_PING
            client.send(payload, OPCODE_PONG)
    assert client.open
    clock.advance(2.5)
    frames = client.received()
    errors = [f for f in client.stomp(frames) if f.command == "ERROR"]
    assert [e.get("message") for e in errors] == ["heart-beat timeout"]
    assert close_code(frames) == 1000


def test_server_heart_beats_are_one_byte_messages(clock: Clock) -> None:
    """The server's STOMP heart-beat is an EOL, sent as its own message of the client's kind."""
    client = Client(make_factory(clock, config=SessionConfig(heartbeat=(1000, 0))))
    client.send(b"CONNECT\naccept-version:1.2\nheart-beat:0,1000\n\n\x00", OPCODE_BINARY)
    client.received()
    clock.pump([0.5, 0.5])
    assert client.received() == [(OPCODE_BINARY, b"\n")]


# -- writes gathered per read ------------------------------------------------------


class CountingTransport(SocketLikeTransport):
    """Counts the calls to ``write`` (the handshake's included)."""

    writes = 0

    def write(self, data: bytes) -> None:
        self.writes += 1
        super().write(data)


def test_fan_out_of_one_read_is_one_socket_write_per_subscriber(clock: Clock) -> None:
    """
    Twenty SENDs in one message reach a WebSocket subscriber in one socket write, as twenty
    messages.
    """
    broker = Broker(clock)
    factory = make_factory(clock, broker)
    transport = CountingTransport(peerAddress=IPv4Address("TCP", "127.0.0.1", 7))
    subscriber = Client(factory, transport=transport, port=7)
    subscriber.connect()
    subscriber.send(b"SUBSCRIBE\nid:0\ndestination:/topic/a\n\n\x00")
    publisher = Client(factory, port=8)
    publisher.connect()
    transport.writes = 0
    publisher.send(b"".join(b"SEND\ndestination:/topic/a\n\n%d\x00" % n for n in range(20)))
    assert transport.writes == 1
    frames = subscriber.received()
    assert [opcode for opcode, _ in frames] == [OPCODE_TEXT] * 20
    assert [frame.body for frame in subscriber.stomp(frames)] == [b"%d" % n for n in range(20)]


def test_a_receipt_answered_in_the_read_that_brings_the_close_goes_first(clock: Clock) -> None:
    """
    A RECEIPT made by the same read as the client's close frame precedes the close reply (RFC 6455
    5.5.1).
    """
    client = Client(make_factory(clock))
    client.connect()
    client.protocol.dataReceived(
        client_frame(b"SEND\ndestination:/queue/q\nreceipt:r\n\nx\x00", OPCODE_TEXT, True)
        + client_frame(close_payload(1000), OPCODE_CLOSE, True)
    )
    frames = client.received()
    [receipt] = client.stomp(frames)
    assert receipt.get("receipt-id") == "r"
    assert frames[-1][0] == OPCODE_CLOSE and close_code(frames) == 1000
