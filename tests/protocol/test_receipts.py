"""
RECEIPT frames and held frames (stompbroker.protocol.receipts), against a
recording broker that answers SEND, ACK, NACK and COMMIT with store writes the
test fires: receipts wait for the store and keep the order of the frames they
answer, and a frame that waits for every earlier write holds the client's next ones
(the write window itself: test_write_window).
"""

from __future__ import annotations

from stompbroker.protocol.errors import ProtocolError
from stompbroker.protocol.frames import Frame
from stompbroker.protocol.session import SessionConfig, State
from tests.support.session import DEFAULT_CONFIG, RecordingBroker, connected, error_of, frame


def storing(config: SessionConfig = DEFAULT_CONFIG) -> tuple:
    """:returns: a connected session whose broker answers with store writes, as ``connected``."""
    return connected(config=config, broker=RecordingBroker(stores=True))


def receipts(transport) -> list[str | None]:
    """:returns: the receipt ids of the RECEIPT frames written since the last look."""
    return [f.get("receipt-id") for f in transport.frames() if f.command == "RECEIPT"]


def test_receipt_of_a_stored_send_waits_for_the_store() -> None:
    """A persistent SEND's RECEIPT means stored: it goes out once the store write is done."""
    session, transport, _, broker = storing()
    session.receive_data(frame("SEND", ("destination", "/queue/a"), ("receipt", "r1")))
    assert receipts(transport) == []
    broker.writes[0].callback(None)
    assert receipts(transport) == ["r1"]


def test_a_later_receipt_waits_behind_an_earlier_one() -> None:
    """A RECEIPT that could go at once waits for one before it: receipts keep frame order."""
    session, transport, _, broker = storing()
    session.receive_data(
        frame("SEND", ("destination", "/queue/a"), ("receipt", "r1"))
        + frame("SUBSCRIBE", ("id", "1"), ("destination", "/topic/t"), ("receipt", "r2"))
    )
    assert broker.named("subscribe"), "a frame with a receipt holds nothing back"
    assert receipts(transport) == []
    broker.writes[0].callback(None)
    assert receipts(transport) == ["r1", "r2"]


def test_writes_done_out_of_order_answer_in_order() -> None:
    """A later store write that finishes first still answers after the earlier one."""
    session, transport, _, broker = storing()
    session.receive_data(
        frame("ACK", ("id", "m-1"), ("receipt", "a1"))
        + frame("ACK", ("id", "m-2"), ("receipt", "a2"))
    )
    broker.writes[1].callback(None)
    assert receipts(transport) == []
    broker.writes[0].callback(None)
    assert receipts(transport) == ["a1", "a2"]


def test_an_ack_without_receipt_holds_no_frame_back() -> None:
    """An ACK without receipt only keeps later receipts behind it; the next frames are handled."""
    session, transport, _, broker = storing()
    session.receive_data(
        frame("ACK", ("id", "m-1"))
        + frame("SUBSCRIBE", ("id", "1"), ("destination", "/topic/t"), ("receipt", "r"))
    )
    assert len(broker.named("subscribe")) == 1
    assert receipts(transport) == []
    broker.writes[0].callback(None)
    assert receipts(transport) == ["r"]


def test_held_frames_past_the_limit_stop_reading_until_handled() -> None:
    """Past max_held_bytes of held frames the session reads no more, until it has handled them."""
    session, transport, _, broker = storing(SessionConfig(max_held_bytes=100))
    session.receive_data(frame("SEND", ("destination", "/queue/a")))
    session.receive_data(frame("BEGIN", ("transaction", "t")))
    session.receive_data(frame("SEND", ("destination", "/queue/b"), body=b"x" * 60))
    assert transport.reading
    session.receive_data(frame("SEND", ("destination", "/queue/c"), body=b"y" * 60))
    assert not transport.reading
    broker.writes[0].callback(None)
    assert transport.reading
    assert broker.named("begin") == ["t"]
    assert [m.destination for m in broker.named("send")] == ["/queue/a", "/queue/b", "/queue/c"]


def test_a_message_not_stored_is_an_error_with_the_receipt_id() -> None:
    """A store write that fails answers the SEND with an ERROR instead of its RECEIPT."""
    session, transport, _, broker = storing()
    session.receive_data(frame("SEND", ("destination", "/queue/a"), ("receipt", "r1")))
    broker.writes[0].errback(OSError("disk full"))
    error = error_of(transport)
    assert (error.get("message"), error.get("receipt-id")) == ("message not stored", "r1")
    assert b"disk full" in error.body


def test_a_store_error_the_broker_worded_reaches_the_client_as_it_is() -> None:
    """A ProtocolError from the store is the ERROR the client gets."""
    session, transport, _, broker = storing()
    session.receive_data(frame("COMMIT", ("transaction", "t"), ("receipt", "c")))
    broker.writes[0].errback(ProtocolError("store full", "try later"))
    error = error_of(transport)
    assert (error.get("message"), error.get("receipt-id")) == ("store full", "c")


def test_disconnect_waits_for_the_receipts_before_it() -> None:
    """STOMP 1.2, "DISCONNECT": its RECEIPT comes after every earlier one, then the close."""
    session, transport, _, broker = storing()
    session.receive_data(
        frame("SEND", ("destination", "/queue/a"), ("receipt", "r1"))
        + frame("DISCONNECT", ("receipt", "bye"))
    )
    assert not transport.closed
    broker.writes[0].callback(None)
    assert transport.frames() == [
        Frame("RECEIPT", (("receipt-id", "r1"),)),
        Frame("RECEIPT", (("receipt-id", "bye"),)),
    ]
    assert transport.closed
    assert session.state is State.CLOSING


def test_a_write_done_after_the_connection_is_gone_answers_nothing() -> None:
    """A store write that finishes once the client has gone writes nothing and fails nothing."""
    session, transport, _, broker = storing()
    session.receive_data(frame("SEND", ("destination", "/queue/a"), ("receipt", "r1")))
    session.connection_lost()
    broker.writes[0].callback(None)
    assert transport.take() == b""
    assert session.state is State.CLOSED
