"""
What the client publishes (stompbroker.protocol.send_reading): SEND and the
headers it forwards, the write right it needs, and the transaction frames,
against the recording fake broker.
"""

from __future__ import annotations

import pytest
from twisted.internet.defer import succeed

from stompbroker.protocol.frames import Frame
from stompbroker.protocol.session import SessionConfig
from tests.support.session import RecordingAccess, connected, error_of, frame, subscribe


def test_send_is_delivered_with_user_headers_and_without_hop_headers() -> None:
    """
    A MESSAGE carries destination, message-id, subscription and the SEND's own headers, not its
    receipt.
    """
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


def test_transaction_frames_reach_the_broker_with_receipts() -> None:
    """BEGIN, COMMIT and ABORT are passed to the broker and answered with their receipts."""
    session, transport, _, broker = connected()
    for command, transaction in [("BEGIN", "a"), ("COMMIT", "a"), ("BEGIN", "b"), ("ABORT", "b")]:
        session.receive_data(
            frame(command, ("transaction", transaction), ("receipt", command + transaction))
        )
    assert [call for call in broker.calls if call[0] in {"begin", "commit", "abort"}] == [
        ("begin", "a"),
        ("commit", "a"),
        ("begin", "b"),
        ("abort", "b"),
    ]
    assert [f.get("receipt-id") for f in transport.frames()] == [
        "BEGINa",
        "COMMITa",
        "BEGINb",
        "ABORTb",
    ]


@pytest.mark.parametrize("command", ["BEGIN", "COMMIT", "ABORT"])
def test_transaction_frame_without_transaction_header_is_an_error(command: str) -> None:
    """STOMP 1.2: BEGIN, COMMIT and ABORT require a transaction header."""
    session, transport, _, _ = connected()
    session.receive_data(frame(command))
    assert error_of(transport).get("message") == "missing transaction header"


def test_transaction_header_is_passed_with_send_ack_and_nack() -> None:
    """SEND, ACK and NACK in a transaction name it to the broker, which holds them until COMMIT."""
    session, transport, _, broker = connected()
    subscription = subscribe(
        session, transport, ("id", "s"), ("destination", "/queue/q"), ("ack", "client")
    )
    session.receive_data(frame("SEND", ("destination", "/queue/q"), ("transaction", "t")))
    session.receive_data(frame("ACK", ("id", f"{subscription.number}.m-1"), ("transaction", "t")))
    session.receive_data(frame("NACK", ("id", f"{subscription.number}.m-2"), ("transaction", "t")))
    [(transaction, sent)] = broker.named("send-in")
    assert transaction == "t"
    assert ("transaction", "t") not in sent.headers
    assert broker.named("ack") == [("m-1", subscription, "t")]
    assert broker.named("nack") == [("m-2", subscription, True, "t")]


def test_send_needs_the_write_right() -> None:
    """With access rules, every SEND asks for the write right on its destination, frame by frame."""
    access = RecordingAccess(refused="/queue/secret")
    config = SessionConfig(authenticator=lambda *_: succeed("who"), access=access)
    session, transport, _, broker = connected(config=config)
    session.receive_data(frame("SEND", ("destination", "/queue/open"), body=b"1"))
    session.receive_data(frame("SEND", ("destination", "/queue/secret"), ("receipt", "r")))
    assert access.checks == [("who", "write", "/queue/open"), ("who", "write", "/queue/secret")]
    error = error_of(transport)
    assert (error.get("receipt-id"), len(broker.named("send"))) == ("r", 1)


def test_repeated_headers_are_forwarded_once_the_first_winning() -> None:
    """STOMP 1.2, "Repeated Header Entries": only the first of a repeated header is published."""
    session, _, _, broker = connected()
    session.receive_data(
        frame(
            "SEND",
            ("destination", "/queue/a"),
            ("destination", "/queue/b"),
            ("x", "1"),
            ("x", "2"),
        )
    )
    [message] = broker.named("send")
    assert (message.destination, message.headers) == ("/queue/a", (("x", "1"),))


@pytest.mark.parametrize(
    ("data", "lines", "headers"),
    [
        (
            b"SEND\ndestination:/queue/a\nseq:1\nts:2\ncontent-length:3\n\nabc\0",
            b"seq:1\nts:2",
            (("seq", "1"), ("ts", "2")),
        ),
        (b"SEND\ndestination:/queue/a\nseq:1\n\n\0", b"seq:1", (("seq", "1"),)),
        (
            "SEND\ndestination:/queue/a\nn\u00e9:\u20ac\n\n\0".encode(),
            "n\u00e9:\u20ac".encode(),
            (("n\u00e9", "\u20ac"),),
        ),
        (
            "SEND\ndestination:/queue/\u00e9\nseq:1\ncontent-length:0\n\n\0".encode(),
            b"seq:1",
            (("seq", "1"),),
        ),
        # Each of these is handed over as pairs only.
        (b"SEND\ndestination:/queue/a\n\n\0", None, ()),
        (
            b"SEND\ndestination:/queue/a\nseq:1\nreceipt:r\ncontent-length:0\n\n\0",
            None,
            (("seq", "1"),),
        ),
        (b"SEND\ndestination:/queue/a\nx:1\nx:2\n\n\0", None, (("x", "1"),)),
        (b"SEND\nseq:1\ndestination:/queue/a\n\n\0", None, (("seq", "1"),)),
        (b"SEND\ndestination:/queue/a\ncontent-length:0\nseq:1\n\n\0", None, (("seq", "1"),)),
        (b"SEND\ndestination:/queue/a\nx:a:b\n\n\0", None, (("x", "a:b"),)),
        (b"SEND\ndestination:/queue/a\nx:a\\cb\n\n\0", None, (("x", "a:b"),)),
        (b"SEND\r\ndestination:/queue/a\r\nseq:1\r\n\r\n\0", None, (("seq", "1"),)),
    ],
    ids=[
        "content-length last",
        "no content-length",
        "utf-8",
        "utf-8 destination",
        "no user header",
        "receipt",
        "repeated header",
        "destination not first",
        "content-length not last",
        "colon in a value",
        "escape",
        "crlf",
    ],
)
def test_a_plain_send_hands_its_header_lines_over_as_they_came(
    data: bytes, lines: bytes | None, headers: tuple[tuple[str, str], ...]
) -> None:
    """
    A SEND whose user headers are plain lines between destination (first) and content-length
    (last, if any) hands them to the broker as bytes, with the pairs; anything else (repeats,
    escapes, a second colon, CRLF, a hop header among them) as pairs only.  Either way the
    message reads as the same pairs, and a subscriber gets the same MESSAGE.
    """
    session, transport, _, broker = connected()
    for number, destination in enumerate(("/queue/a", "/queue/\u00e9")):
        session.receive_data(frame("SUBSCRIBE", ("id", str(number)), ("destination", destination)))
    session.receive_data(data)
    assert broker.lines == [lines]
    [message] = broker.named("send")
    assert message.headers == headers
    delivered = [sent for sent in transport.frames() if sent.command == "MESSAGE"]
    assert [sent.headers[3:-1] for sent in delivered] == [headers]
