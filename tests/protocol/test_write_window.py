"""
The write window (stompbroker.protocol.write_window): a session goes on handling a
producer's frames while its persistent SENDs are being stored, sends their RECEIPTs
in frame order once stored, stops reading at the window's bound, waits for every
write before BEGIN, COMMIT and DISCONNECT, and answers a failed write, or a bad
later frame, with an ERROR only after the receipts before it.  The broker double
answers every SEND, ACK and COMMIT with a Deferred the test fires by hand.
"""

from __future__ import annotations

from stompbroker.protocol.frames import Frame
from stompbroker.protocol.session import SessionConfig, State
from tests.support.session import RecordingBroker, connected, frame


def storing(**settings: int) -> tuple:
    """:returns: a connected session whose broker answers with store writes, as ``connected``."""
    return connected(config=SessionConfig(**settings), broker=RecordingBroker(stores=True))


def send(destination: str = "/queue/a", receipt: str | None = None, body: bytes = b"") -> bytes:
    """:returns: a SEND frame, with a receipt when given one."""
    headers = [("destination", destination)]
    if receipt is not None:
        headers.append(("receipt", receipt))
    return frame("SEND", *headers, body=body)


def commands(transport) -> list[tuple[str, str | None]]:
    """:returns: each frame written since the last look, as (command, receipt-id)."""
    return [(f.command, f.get("receipt-id")) for f in transport.frames()]


def test_sends_without_receipt_are_handled_while_the_first_is_being_stored() -> None:
    """A producer's later SENDs reach the broker at once, in order, before any write is done."""
    session, transport, _, broker = storing()
    session.receive_data(send("/queue/a") + send("/queue/b") + send("/stream/c"))
    assert [m.destination for m in broker.named("send")] == ["/queue/a", "/queue/b", "/stream/c"]
    assert len(broker.writes) == 3
    assert session.receipts.window.pending == 3
    for write in broker.writes:
        write.callback(None)
    assert session.receipts.window.pending == 0
    assert transport.take() == b""


def test_receipts_of_pipelined_sends_go_out_in_frame_order() -> None:
    """Writes that finish in any order answer in the order of the SENDs, each once it is stored."""
    session, transport, _, broker = storing()
    session.receive_data(send(receipt="r1") + send() + send(receipt="r3") + send(receipt="r4"))
    assert len(broker.named("send")) == 4
    broker.writes[2].callback(None)
    broker.writes[3].callback(None)
    assert commands(transport) == []
    broker.writes[0].callback(None)
    assert commands(transport) == [("RECEIPT", "r1")]
    broker.writes[1].callback(None)
    assert commands(transport) == [("RECEIPT", "r3"), ("RECEIPT", "r4")]


def test_a_full_window_stops_reading_until_a_write_is_done() -> None:
    """At max_pending_writes pending writes the session reads no more; one done, it reads again."""
    session, transport, _, broker = storing(max_pending_writes=3)
    session.receive_data(send() + send())
    assert transport.reading
    session.receive_data(send())
    assert not transport.reading
    broker.writes[1].callback(None)
    assert transport.reading
    session.receive_data(send())
    assert not transport.reading


def test_the_window_counts_bytes_of_bodies_too() -> None:
    """At max_pending_write_bytes of SEND bodies pending, the session reads no more."""
    session, transport, _, broker = storing(max_pending_write_bytes=100)
    session.receive_data(send(body=b"x" * 60))
    assert transport.reading
    session.receive_data(send(body=b"y" * 40))
    assert not transport.reading
    broker.writes[0].callback(None)
    assert transport.reading
    assert session.receipts.window.pending_bytes == 40


def test_frames_of_a_read_already_made_are_handled_at_the_bound() -> None:
    """The bound stops reading; what one read brought is handled, and its receipts keep order."""
    session, transport, _, broker = storing(max_pending_writes=1)
    session.receive_data(send(receipt="r1") + send(receipt="r2"))
    assert not transport.reading
    assert len(broker.named("send")) == 2
    broker.writes[1].callback(None)
    assert not transport.reading, "one write still pending: the window is still full"
    broker.writes[0].callback(None)
    assert transport.reading
    assert commands(transport) == [("RECEIPT", "r1"), ("RECEIPT", "r2")]


def test_a_failed_write_is_an_error_after_the_receipts_before_it() -> None:
    """
    A SEND not stored gets an ERROR with its receipt id, once the RECEIPTs of earlier SENDs are
    out; frames after it get no RECEIPT, and nothing more is read or handled.
    """
    session, transport, _, broker = storing()
    session.receive_data(send(receipt="r1") + send(receipt="r2") + send(receipt="r3"))
    broker.writes[1].errback(OSError("disk full"))
    assert commands(transport) == []
    assert not transport.reading
    session.receive_data(send("/queue/late", receipt="r4"))
    assert len(broker.named("send")) == 3
    broker.writes[2].callback(None)
    broker.writes[0].callback(None)
    assert commands(transport) == [("RECEIPT", "r1"), ("ERROR", "r2")]
    assert transport.closed
    assert session.state is State.CLOSING


def test_an_error_for_a_later_frame_waits_for_earlier_receipts() -> None:
    """A bad frame after a SEND being stored: the SEND's RECEIPT first, then the ERROR."""
    session, transport, _, broker = storing()
    session.receive_data(send(receipt="r1") + frame("SEND", ("receipt", "bad")) + send("/queue/z"))
    assert [m.destination for m in broker.named("send")] == ["/queue/a"]
    assert commands(transport) == []
    assert not transport.closed and not transport.reading
    broker.writes[0].callback(None)
    frames = transport.frames()
    assert [(f.command, f.get("receipt-id")) for f in frames] == [
        ("RECEIPT", "r1"),
        ("ERROR", "bad"),
    ]
    assert transport.closed


def test_a_parser_fault_waits_for_earlier_receipts() -> None:
    """Garbage after a SEND being stored: its RECEIPT, then the ERROR for the garbage."""
    session, transport, _, broker = storing()
    session.receive_data(send(receipt="r1") + b"NOT-A-COMMAND\n\n\x00")
    assert commands(transport) == []
    broker.writes[0].callback(None)
    assert [command for command, _ in commands(transport)] == ["RECEIPT", "ERROR"]
    assert transport.closed


def test_begin_and_commit_wait_for_every_earlier_write() -> None:
    """A transaction begins, and commits, only once what the client sent before is stored."""
    session, transport, _, broker = storing()
    session.receive_data(
        send(receipt="r1")
        + frame("BEGIN", ("transaction", "t"), ("receipt", "b"))
        + frame("SEND", ("destination", "/queue/a"), ("transaction", "t"))
    )
    assert broker.named("begin") == []
    assert len(broker.named("send")) == 1
    broker.writes[0].callback(None)
    assert broker.named("begin") == ["t"]
    assert len(broker.named("send")) == 2
    session.receive_data(
        send(receipt="r2") + frame("COMMIT", ("transaction", "t"), ("receipt", "c"))
    )
    assert broker.named("commit") == []
    pending = broker.writes[-1]
    pending.callback(None)
    broker.writes[1].callback(None)
    assert broker.named("commit") == ["t"]
    broker.writes[-1].callback(None)
    assert commands(transport) == [
        ("RECEIPT", "r1"),
        ("RECEIPT", "b"),
        ("RECEIPT", "r2"),
        ("RECEIPT", "c"),
    ]


def test_disconnect_waits_for_every_write_even_without_receipts() -> None:
    """DISCONNECT after SENDs without receipts: closed, with its RECEIPT, once all are stored."""
    session, transport, _, broker = storing()
    session.receive_data(send() + send() + frame("DISCONNECT", ("receipt", "bye")))
    broker.writes[1].callback(None)
    assert not transport.closed
    broker.writes[0].callback(None)
    assert transport.frames() == [Frame("RECEIPT", (("receipt-id", "bye"),))]
    assert transport.closed


def test_a_connection_lost_with_writes_pending_answers_nothing() -> None:
    """
    The client goes while its SENDs are being stored: they were handed to the broker (so they are
    not lost), and once stored, or failed, nothing is written and nothing fails.
    """
    session, transport, _, broker = storing(max_pending_writes=2)
    session.receive_data(send(receipt="r1") + send(receipt="r2"))
    session.connection_lost()
    broker.writes[0].callback(None)
    broker.writes[1].errback(OSError("disk full"))
    assert len(broker.named("send")) == 2
    assert transport.take() == b""
    assert session.state is State.CLOSED
    assert session.receipts.window.pending == 0
