"""
Tests of the sans-I/O session, against a recording fake broker and a list of bytes.

No sockets and no reactor: time is a ``task.Clock``.
"""

from __future__ import annotations

import pytest
from zope.interface.verify import verifyObject

from stompbroker.interfaces import IBroker, IConnection, ISubscriber
from stompbroker.protocol.encoder import encode
from stompbroker.protocol.frames import Frame
from stompbroker.protocol.negotiation import negotiate_heartbeat, negotiate_version
from stompbroker.protocol.session import SessionConfig, State
from tests.support.session import RecordingBroker, connected, error_of, frame, make_session

# -- negotiation --------------------------------------------------------------


@pytest.mark.parametrize(
    "accept, expected",
    [(None, "1.0"), ("1.0", "1.0"), ("1.1", "1.1"), ("1.0,1.1,1.2", "1.2"), ("1.1, 1.0", "1.1")],
)
def test_version_negotiation_picks_highest_common(accept: str | None, expected: str) -> None:
    """STOMP 1.2, "Protocol Negotiation": the highest version both sides accept wins; none means 1.0."""
    assert negotiate_version(accept, ("1.2", "1.1", "1.0")) == expected


@pytest.mark.parametrize(
    "client, server, expected",
    [
        (None, (10000, 10000), (0, 0)),
        ("0,0", (10000, 10000), (0, 0)),
        ("4000,6000", (10000, 10000), (10000, 10000)),
        ("20000,30000", (10000, 10000), (30000, 20000)),
        ("1000,0", (10000, 10000), (0, 10000)),
        ("1000,1000", (0, 0), (0, 0)),
    ],
)
def test_heartbeat_negotiation(client: str | None, server: tuple[int, int], expected) -> None:
    """STOMP 1.2, "Heart-beating": each direction is the larger of the two offers, or off when either is 0."""
    assert negotiate_heartbeat(client, server) == expected


def test_connected_frame_carries_version_session_server_heartbeat() -> None:
    """STOMP 1.2, "CONNECTED Frame": version, session, server and heart-beat headers."""
    session, transport, _, broker = make_session(
        config=SessionConfig(server_name="stompbroker/test", heartbeat=(3000, 4000))
    )
    session.receive_data(frame("STOMP", ("accept-version", "1.1,1.2"), ("host", "/")))
    [reply] = transport.frames()
    assert reply.command == "CONNECTED"
    assert reply.get("version") == "1.2"
    assert reply.get("session") == "s1"
    assert reply.get("server") == "stompbroker/test"
    assert reply.get("heart-beat") == "3000,4000"
    assert session.state is State.CONNECTED
    assert session in broker.connections
    verifyObject(IConnection, session)


def test_connect_without_accept_version_is_1_0() -> None:
    """STOMP 1.1, "Protocol Negotiation": a CONNECT without accept-version speaks 1.0."""
    session, transport, _, _ = make_session()
    session.receive_data(b"CONNECT\nlogin:guest\n\n\x00")
    [reply] = transport.frames()
    assert reply.get("version") == "1.0"
    assert reply.get("heart-beat") is None
    assert session.version == "1.0"


def test_no_common_version_errors_with_version_header_and_closes() -> None:
    """STOMP 1.2, "Protocol Negotiation": the ERROR lists the versions the server speaks."""
    session, transport, _, _ = make_session()
    session.receive_data(frame("CONNECT", ("accept-version", "2.0,3.1")))
    error = error_of(transport)
    assert error.get("version") == "1.2,1.1,1.0"
    assert "version" in error.get("message", "")
    assert b"2.0,3.1" in error.body


# -- bad input ----------------------------------------------------------------


def test_frame_before_connect_is_an_error() -> None:
    """Any frame but CONNECT or STOMP first gets an ERROR naming it, then a close."""
    session, transport, _, broker = make_session()
    session.receive_data(frame("SEND", ("destination", "/topic/a"), ("receipt", "r1")))
    error = error_of(transport)
    assert error.get("message") == "expected CONNECT"
    assert error.get("receipt-id") == "r1"
    assert b"SEND" in error.body
    assert not any(call == "send" for call, _ in broker.calls)


def test_input_after_error_is_ignored() -> None:
    """After an ERROR the session reads nothing more (crossbar MQTT PROTOCOL_VIOLATION)."""
    session, transport, _, broker = make_session()
    session.receive_data(b"BOGUS\n\n\x00")
    error_of(transport)
    session.receive_data(frame("CONNECT", ("accept-version", "1.2")))
    assert transport.take() == b""
    assert session.state is State.CLOSING


def test_unknown_command_is_an_error() -> None:
    """An unknown command gets an ERROR that names it."""
    session, transport, _, _ = connected()
    session.receive_data(b"FROB\nreceipt:9\n\n\x00")
    error = error_of(transport)
    assert error.get("message") == "unknown command"
    assert b"FROB" in error.body
    assert error.get("receipt-id") == "9"


def test_second_connect_is_an_error() -> None:
    """A CONNECT on a connected session is an error."""
    session, transport, _, _ = connected()
    session.receive_data(frame("CONNECT", ("accept-version", "1.2")))
    assert error_of(transport).get("message") == "already connected"


@pytest.mark.parametrize(
    "command, headers, missing",
    [
        ("SEND", [], "destination"),
        ("SUBSCRIBE", [("id", "1")], "destination"),
        ("SUBSCRIBE", [("destination", "/topic/a")], "id"),
        ("UNSUBSCRIBE", [], "id"),
    ],
)
def test_missing_required_header_is_an_error(command: str, headers, missing: str) -> None:
    """STOMP 1.2: a frame without a required header gets an ERROR naming the header."""
    session, transport, _, _ = connected()
    session.receive_data(frame(command, *headers, ("receipt", "r7")))
    error = error_of(transport)
    assert error.get("message") == f"missing {missing} header"
    assert error.get("receipt-id") == "r7"


def test_malformed_frame_is_an_error_with_its_reason() -> None:
    """A header line without a colon gets an ERROR saying so."""
    session, transport, _, _ = connected()
    session.receive_data(b"SEND\ndestination:/topic/a\nno colon here\n\n\x00")
    error = error_of(transport)
    assert error.get("message")
    assert "no colon here" in error.get("message", "") + error.body.decode()


def test_frame_over_the_size_limit_is_an_error() -> None:
    """An oversized frame gets an ERROR naming the limit, before it is all read."""
    session, transport, _, broker = connected(config=SessionConfig(max_frame_size=1024))
    session.receive_data(b"SEND\ndestination:/topic/a\n\n" + b"x" * 2000)
    error = error_of(transport)
    assert "too large" in error.get("message", "")
    assert b"1024" in error.body + error.get("message", "").encode()


def test_invalid_ack_mode_is_an_error() -> None:
    """SUBSCRIBE with an ack mode STOMP does not define is an error."""
    session, transport, _, _ = connected()
    session.receive_data(frame("SUBSCRIBE", ("id", "1"), ("destination", "/topic/a"), ("ack", "x")))
    assert error_of(transport).get("message") == "invalid ack mode"


def test_malformed_heartbeat_header_is_an_error() -> None:
    """A heart-beat header that is not two integers is an error."""
    session, transport, _, _ = make_session()
    session.receive_data(frame("CONNECT", ("accept-version", "1.2"), ("heart-beat", "fast")))
    assert error_of(transport).get("message") == "invalid heart-beat header"


def test_full_broker_rejects_the_connection() -> None:
    """When the broker refuses a connection, the client gets an ERROR naming the limit."""
    session, transport, _, _ = make_session(broker=RecordingBroker(full=True))
    assert error_of(transport).get("message") == "too many connections"


def test_recording_broker_provides_ibroker() -> None:
    """The fake broker these tests use offers everything a session may ask of a broker."""
    verifyObject(IBroker, RecordingBroker())


# -- subscriptions, delivery and receipts -----------------------------------


def test_send_is_delivered_with_user_headers_and_without_hop_headers() -> None:
    """A MESSAGE carries destination, message-id, subscription and the SEND's own headers, not its receipt."""
    session, transport, _, broker = connected()
    session.receive_data(frame("SUBSCRIBE", ("id", "sub-1"), ("destination", "/topic/a")))
    body = b"binary\x00body"
    session.receive_data(
        frame(
            "SEND",
            ("destination", "/topic/a"),
            ("content-type", "application/octet-stream"),
            ("content-length", str(len(body))),
            ("receipt", "r1"),
            ("x-custom", "a:b\nc"),
            ("x-custom", "second"),
            body=body,
        )
    )
    message, receipt = transport.frames()
    assert message.command == "MESSAGE"
    assert message.get("subscription") == "sub-1"
    assert message.get("destination") == "/topic/a"
    assert message.get("message-id")
    assert message.get("content-type") == "application/octet-stream"
    assert message.get("content-length") == str(len(body))
    assert message.get("x-custom") == "a:b\nc"
    assert [v for k, v in message.headers if k == "x-custom"] == ["a:b\nc"]
    assert message.get("receipt") is None
    assert message.body == body
    assert receipt == Frame("RECEIPT", (("receipt-id", "r1"),))
    [send] = [arg for call, arg in broker.calls if call == "send"]
    assert ("receipt", "r1") not in send.headers


def test_subscribe_hands_broker_a_subscriber() -> None:
    """SUBSCRIBE gives the broker an ISubscriber with id, destination and ack mode."""
    session, transport, _, broker = connected()
    session.receive_data(
        frame("SUBSCRIBE", ("id", "7"), ("destination", "/topic/x.*"), ("receipt", "r"))
    )
    [subscriber] = broker.subscribers
    verifyObject(ISubscriber, subscriber)
    assert (subscriber.subscription_id, subscriber.destination, subscriber.ack_mode) == (
        "7",
        "/topic/x.*",
        "auto",
    )
    assert subscriber.connection is session
    assert transport.frames() == [Frame("RECEIPT", (("receipt-id", "r"),))]


def test_duplicate_subscription_id_is_an_error() -> None:
    """Two subscriptions with one id on one connection are an error."""
    session, transport, _, _ = connected()
    session.receive_data(frame("SUBSCRIBE", ("id", "1"), ("destination", "/topic/a")))
    session.receive_data(frame("SUBSCRIBE", ("id", "1"), ("destination", "/topic/b")))
    assert error_of(transport).get("message") == "duplicate subscription"


def test_unsubscribe_by_id_stops_delivery() -> None:
    """STOMP 1.2, "UNSUBSCRIBE": the id names the subscription to end."""
    session, transport, _, broker = connected()
    session.receive_data(frame("SUBSCRIBE", ("id", "1"), ("destination", "/topic/a")))
    session.receive_data(frame("UNSUBSCRIBE", ("id", "1"), ("receipt", "u")))
    session.receive_data(frame("SEND", ("destination", "/topic/a")))
    assert transport.frames() == [Frame("RECEIPT", (("receipt-id", "u"),))]
    assert broker.subscribers == []


def test_unsubscribe_unknown_id_is_an_error() -> None:
    """UNSUBSCRIBE of an id the connection does not have is an error."""
    session, transport, _, _ = connected()
    session.receive_data(frame("UNSUBSCRIBE", ("id", "nope")))
    assert error_of(transport).get("message") == "unknown subscription"


def test_stomp_1_0_subscription_without_id_uses_destination() -> None:
    """STOMP 1.0: id is optional; the destination stands in, and UNSUBSCRIBE by destination works."""
    session, transport, _, broker = connected(version="1.0")
    session.receive_data(frame("SUBSCRIBE", ("destination", "/topic/a"), version="1.0"))
    session.receive_data(frame("SEND", ("destination", "/topic/a"), body=b"hi", version="1.0"))
    [message] = transport.frames("1.0")
    assert message.get("subscription") == "/topic/a"
    session.receive_data(frame("UNSUBSCRIBE", ("destination", "/topic/a"), version="1.0"))
    assert broker.subscribers == []
    assert not transport.closed


def test_stomp_1_0_headers_are_not_escaped() -> None:
    """STOMP 1.0 has no escaping: a backslash in a header passes through as it is."""
    session, transport, _, _ = connected(version="1.0")
    session.receive_data(frame("SUBSCRIBE", ("destination", "/topic/a"), version="1.0"))
    session.receive_data(b"SEND\ndestination:/topic/a\nx-path:C:\\dir\n\nhi\x00")
    [message] = transport.frames("1.0")
    assert message.get("x-path") == "C:\\dir"
    assert b"x-path:C:\\dir\n" in encode(message, "1.0")


def test_message_shared_bytes_are_encoded_once_per_message() -> None:
    """Delivering one message to many subscribers encodes its shared part once."""
    session, transport, _, broker = connected()
    for n in range(3):
        session.receive_data(frame("SUBSCRIBE", ("id", str(n)), ("destination", "/topic/a")))
    session.receive_data(frame("SEND", ("destination", "/topic/a"), body=b"x"))
    [send] = [arg for call, arg in broker.calls if call == "send"]
    assert "1.0" not in send.wire
    assert len({id(tail) for tail in send.wire.values()}) == 1
    assert [f.get("subscription") for f in transport.frames()] == ["0", "1", "2"]


def test_frames_split_and_batched_are_all_handled() -> None:
    """Several frames in one chunk, and one frame over many chunks, are handled alike."""
    session, transport, _, _ = make_session()
    stream = (
        frame("CONNECT", ("accept-version", "1.2"))
        + frame("SUBSCRIBE", ("id", "1"), ("destination", "/topic/a"))
        + b"\n\r\n"
        + frame("SEND", ("destination", "/topic/a"), ("receipt", "r"), body=b"hello")
    )
    for index in range(len(stream)):
        session.receive_data(stream[index : index + 1])
    commands = [f.command for f in transport.frames()]
    assert commands == ["CONNECTED", "MESSAGE", "RECEIPT"]


# -- DISCONNECT and losing the connection ------------------------------------


def test_disconnect_sends_receipt_then_closes() -> None:
    """STOMP 1.2, "DISCONNECT": the RECEIPT is written before the connection closes."""
    session, transport, _, broker = connected()
    session.receive_data(frame("SUBSCRIBE", ("id", "1"), ("destination", "/topic/a")))
    session.receive_data(frame("DISCONNECT", ("receipt", "bye")) + frame("SEND", ("destination", "/topic/a")))
    assert transport.frames() == [Frame("RECEIPT", (("receipt-id", "bye"),))]
    assert transport.closed
    assert broker.subscribers == []
    assert ("close_connection", session) in broker.calls
    assert not any(call == "send" for call, _ in broker.calls)


def test_connection_lost_releases_subscriptions_once() -> None:
    """A vanished client's subscriptions and registration are dropped, once."""
    session, _, _, broker = connected()
    session.receive_data(frame("SUBSCRIBE", ("id", "1"), ("destination", "/topic/a")))
    session.receive_data(b"SEND\ndestination:/topic/a\n\nhalf a fra")
    session.connection_lost()
    session.connection_lost()
    assert broker.subscribers == []
    assert broker.calls.count(("close_connection", session)) == 1
    assert session.state is State.CLOSED


# -- heart-beats ---------------------------------------------------------------


def test_server_sends_heartbeat_when_silent() -> None:
    """STOMP 1.2, "Heart-beating": the server sends an EOL when it has sent nothing for the interval."""
    session, transport, clock, _ = connected(
        heart_beat="0,1000", config=SessionConfig(heartbeat=(1000, 0))
    )
    assert session.heartbeat == (1000, 0)
    clock.advance(0.5)
    clock.advance(0.5)
    assert transport.take() == b"\n"
    clock.advance(1.0)
    assert transport.take() == b"\n"


def test_server_skips_heartbeat_after_other_output() -> None:
    """Any frame sent counts as a heart-beat, so no EOL follows it within the interval."""
    session, transport, clock, _ = connected(
        heart_beat="0,1000", config=SessionConfig(heartbeat=(1000, 0))
    )
    session.receive_data(frame("SUBSCRIBE", ("id", "1"), ("destination", "/topic/a"), ("receipt", "r")))
    clock.advance(0.5)
    assert [f.command for f in transport.frames()] == ["RECEIPT"]
    clock.advance(0.5)
    assert transport.take() == b"\n"


def test_silent_client_is_closed_after_grace() -> None:
    """A client that promised heart-beats and went silent past the grace period gets an ERROR and a close."""
    session, transport, clock, broker = connected(
        heart_beat="1000,0", config=SessionConfig(heartbeat=(0, 1000), heartbeat_grace=2.0)
    )
    assert session.heartbeat == (0, 1000)
    clock.advance(1.9)
    assert not transport.closed
    clock.advance(0.2)
    assert error_of(transport).get("message") == "heart-beat timeout"
    assert session not in broker.connections
    assert clock.getDelayedCalls() == []


def test_client_heartbeats_keep_connection_alive() -> None:
    """EOLs from the client count as life."""
    session, transport, clock, _ = connected(
        heart_beat="1000,0", config=SessionConfig(heartbeat=(0, 1000))
    )
    for _ in range(10):
        clock.advance(1.0)
        session.receive_data(b"\n")
    assert not transport.closed
    assert transport.take() == b""


def test_stomp_1_0_has_no_heartbeats() -> None:
    """STOMP 1.0 predates heart-beating: nothing is scheduled."""
    session, transport, clock, _ = connected(version="1.0", heart_beat="1000,1000")
    assert session.heartbeat == (0, 0)
    assert clock.getDelayedCalls() == []


def test_disconnect_cancels_heartbeat_timers() -> None:
    """After DISCONNECT no timer of the session stays scheduled."""
    session, transport, clock, _ = connected(heart_beat="1000,1000")
    assert clock.getDelayedCalls()
    session.receive_data(frame("DISCONNECT"))
    assert clock.getDelayedCalls() == []


def test_stomp_1_0_subscriber_gets_messages_with_unrepresentable_headers() -> None:
    """A header a 1.0 client cannot parse (LF in the value) is left out of its MESSAGE, not fatal."""
    broker = RecordingBroker()
    old, old_transport, _, _ = make_session(broker)
    old.receive_data(frame("CONNECT"))
    old.receive_data(frame("SUBSCRIBE", ("destination", "/topic/a"), version="1.0"))
    new, new_transport, _, _ = make_session(broker)
    new.receive_data(frame("CONNECT", ("accept-version", "1.2")))
    new.receive_data(
        frame("SEND", ("destination", "/topic/a"), ("x-multi", "a\nb"), ("x-ok", "fine"), body=b"hi")
    )
    [_, message] = old_transport.frames("1.0")
    assert message.get("x-multi") is None
    assert message.get("x-ok") == "fine"
    assert message.body == b"hi"
    assert not old_transport.closed and not new_transport.closed


def test_frame_before_a_malformed_one_in_the_same_chunk_is_acted_on() -> None:
    """A SEND that arrived whole is published even when a malformed frame follows it in the same read."""
    session, transport, _, broker = connected()
    session.receive_data(
        frame("SEND", ("destination", "/topic/a"), body=b"kept") + b"SEND\nno colon here\n\n\x00"
    )
    assert [arg.body for call, arg in broker.calls if call == "send"] == [b"kept"]
    assert "no colon" in error_of(transport).get("message", "")
