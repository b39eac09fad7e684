"""
Tests for :mod:`stompbroker.protocol.encoder`: ``encode``, escaping, the MESSAGE
delivery fast path and ERROR frames.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from stompbroker.protocol.encoder import (
    encode,
    encode_unnegotiated,
    error_frame,
    escape,
    message_prefix,
    message_tail,
    unescape,
)
from stompbroker.protocol.frames import Frame
from stompbroker.protocol.message import Message
from stompbroker.protocol.parser import FrameParser


def parse(data: bytes, version: str = "1.2") -> list[Frame]:
    parser = FrameParser()
    parser.version = version
    return parser.receive_data(data)


# -- encode ------------------------------------------------------------------------


def test_encode_writes_command_headers_blank_line_body_and_nul() -> None:
    """
    A frame is its command, its headers in order, an empty line, the body, NUL and LF (STOMP 1.2,
    Augmented BNF).
    """
    frame = Frame("SEND", (("destination", "/queue/a"), ("foo", "1"), ("foo", "2")), b"hi")
    assert encode(frame) == b"SEND\ndestination:/queue/a\nfoo:1\nfoo:2\n\nhi\0\n"


def test_encode_without_headers_or_body() -> None:
    """A frame with neither headers nor body is its command and two LFs, then NUL."""
    assert encode(Frame("DISCONNECT")) == b"DISCONNECT\n\n\0\n"


def test_encode_adds_no_headers() -> None:
    """encode() writes exactly the frame's headers: no content-length of its own."""
    assert encode(Frame("SEND", (), b"body")) == b"SEND\n\nbody\0\n"


@pytest.mark.parametrize(
    "version, expected",
    [
        ("1.2", b"SEND\na\\cb\\\\:c\\nd\\re\\cf\n\n\0\n"),
        ("1.1", b"SEND\na\\cb\\\\:c\\nd\\re\\cf\n\n\0\n"),
    ],
)
def test_encode_escapes_headers_in_1_1_and_1_2(version: str, expected: bytes) -> None:
    """Backslash, CR, LF and colon are escaped in names and values (STOMP 1.2, Value Encoding)."""
    frame = Frame("SEND", (("a:b\\", "c\nd\re:f"),))
    assert encode(frame, version) == expected


def test_encode_does_not_escape_in_1_0() -> None:
    """STOMP 1.0 has no escaping: backslashes and colons in values go out as they are."""
    frame = Frame("SEND", (("a\\b", "c:d\\n"),))
    assert encode(frame, "1.0") == b"SEND\na\\b:c:d\\n\n\n\0\n"


@pytest.mark.parametrize("command", ["CONNECT", "STOMP", "CONNECTED"])
def test_encode_never_escapes_connect_frames(command: str) -> None:
    """
    CONNECT, STOMP and CONNECTED headers are never escaped, in any version (STOMP 1.2, Value
    Encoding).
    """
    frame = Frame(command, (("passcode", "a:b\\c"),))
    assert encode(frame, "1.2") == command.encode() + b"\npasscode:a:b\\c\n\n\0\n"


@pytest.mark.parametrize(
    "frame, version",
    [
        (Frame("SEND", (("a:b", "c"),)), "1.0"),
        (Frame("SEND", (("a\nb", "c"),)), "1.0"),
        (Frame("SEND", (("a\rb", "c"),)), "1.0"),
        (Frame("SEND", (("a", "b\nc"),)), "1.0"),
        (Frame("SEND", (("a", "b\r"),)), "1.0"),
        (Frame("CONNECT", (("login", "a\nb"),)), "1.2"),
        (Frame("CONNECTED", (("a:b", "c"),)), "1.1"),
    ],
)
def test_encode_refuses_headers_that_cannot_be_sent_unescaped(frame: Frame, version: str) -> None:
    """
    A header with a line break (or a name with a colon) cannot be sent where escaping is off, so
    encode() refuses it.
    """
    with pytest.raises(ValueError):
        encode(frame, version)


def test_encode_unnegotiated_writes_values_raw_and_lines_as_spaces() -> None:
    """Before CONNECTED nothing is escaped: a colon stays, a line break becomes a space."""
    error = Frame("ERROR", (("message", "login failed: bad\\word"), ("receipt-id", "a\nb")))
    assert encode_unnegotiated(error) == (
        b"ERROR\nmessage:login failed: bad\\word\nreceipt-id:a b\n\n\x00\n"
    )


@pytest.mark.parametrize("command", ["", "SE\nND", "SEND\r"])
def test_encode_refuses_invalid_command(command: str) -> None:
    """
    A command that is empty or holds a line break would not parse back, so encode() refuses it.
    """
    with pytest.raises(ValueError, match="invalid command"):
        encode(Frame(command))


def test_encode_refuses_unknown_version() -> None:
    """Only the versions STOMP defines can be encoded for."""
    with pytest.raises(ValueError, match="unsupported STOMP version"):
        encode(Frame("SEND"), "1.3")


def test_encode_refuses_nul_in_body_without_content_length() -> None:
    """
    A body holding NUL needs a content-length, or the frame would end early (STOMP 1.2, Header
    content-length).
    """
    with pytest.raises(ValueError, match="content-length"):
        encode(Frame("SEND", (), b"a\0b"))


@pytest.mark.parametrize("length", ["2", "4", "x", ""])
def test_encode_refuses_content_length_that_does_not_match_the_body(length: str) -> None:
    """A content-length other than the body's length would desynchronise the peer's parser."""
    with pytest.raises(ValueError, match="content-length"):
        encode(Frame("SEND", (("content-length", length),), b"abc"))


def test_encode_keeps_body_with_nul_when_content_length_given() -> None:
    """
    With a content-length, a body holding NUL is written as it is and parses back (STOMP 1.2,
    Header content-length).
    """
    frame = Frame("SEND", (("content-length", "3"),), b"a\0b")
    assert encode(frame) == b"SEND\ncontent-length:3\n\na\0b\0\n"
    assert parse(encode(frame)) == [frame]


# -- escape / unescape helpers ----------------------------------------------------------


@pytest.mark.parametrize(
    "text, version, expected",
    [
        ("a:b\\c\nd\re", "1.2", "a\\cb\\\\c\\nd\\re"),
        ("a:b\\c\nd\re", "1.1", "a\\cb\\\\c\\nd\\re"),
        ("a:b\\c", "1.0", "a:b\\c"),
        ("plain", "1.2", "plain"),
    ],
)
def test_escape_and_unescape_are_inverse(text: str, version: str, expected: str) -> None:
    """
    escape() writes the version's escapes and unescape() reads them back (STOMP 1.2, Value
    Encoding).
    """
    assert escape(text, version) == expected
    assert unescape(expected, version) == text


def test_escape_refuses_line_break_in_1_0() -> None:
    """A 1.0 header cannot hold a line break, so escape() refuses one."""
    with pytest.raises(ValueError):
        escape("a\nb", "1.0")


# -- the MESSAGE fast path ---------------------------------------------------------------


def sample_message() -> Message:
    return Message(
        destination="/topic/prices.eur",
        message_id="m-1",
        headers=(("content-type", "text/plain"), ("note", "a:b")),
        body=b"1.0825\0",
    )


def test_message_tail_holds_everything_after_subscription() -> None:
    """
    The tail is message-id, destination, the user headers, content-length, the body and NUL,
    escaped for the version.
    """
    assert message_tail(sample_message(), "1.2") == (
        b"message-id:m-1\ndestination:/topic/prices.eur\ncontent-type:text/plain\n"
        b"note:a\\cb\ncontent-length:7\n\n1.0825\0\0\n"
    )
    assert message_tail(sample_message(), "1.0") == (
        b"message-id:m-1\ndestination:/topic/prices.eur\ncontent-type:text/plain\n"
        b"note:a:b\ncontent-length:7\n\n1.0825\0\0\n"
    )


def test_message_tail_is_cached_per_version() -> None:
    """
    A message is encoded once per escaping style; later deliveries get the very same bytes from
    message.wire.
    """
    message = sample_message()
    first = message_tail(message, "1.2")
    assert message.wire["1.2"] is first
    assert message_tail(message, "1.2") is first
    assert message_tail(message, "1.1") is first
    assert message.wire["1.1"] is first
    assert message_tail(message, "1.0") is message.wire["1.0"]
    assert message.wire["1.0"] != first


def test_message_tail_leaves_out_unrepresentable_headers_in_1_0() -> None:
    """
    A header STOMP 1.0 cannot carry is left out of a 1.0 subscriber's MESSAGE; delivery never fails.
    """
    message = Message(
        "/topic/a\nb", "m-1", (("note", "two\nlines"), ("a:b", "c"), ("ok", "yes")), b""
    )
    tail = message_tail(message, "1.0")
    assert tail == b"message-id:m-1\ndestination:/topic/a b\nok:yes\ncontent-length:0\n\n\x00\n"


def test_message_prefix_holds_command_subscription_and_extra_headers() -> None:
    """
    The prefix is MESSAGE, the subscription header and any per-subscription headers, escaped
    (STOMP 1.2, MESSAGE).
    """
    assert message_prefix("sub:1", "1.2") == b"MESSAGE\nsubscription:sub\\c1\n"
    assert message_prefix("sub-1", "1.2", (("ack", "a:1"),)) == (
        b"MESSAGE\nsubscription:sub-1\nack:a\\c1\n"
    )
    assert message_prefix("sub:1", "1.0") == b"MESSAGE\nsubscription:sub:1\n"


def test_message_prefix_without_a_subscription_id_has_no_subscription_header() -> None:
    """
    Issue 14: a 1.0 SUBSCRIBE without id gets MESSAGE frames without a subscription header, and
    they share the message's cached tail like any other.
    """
    assert message_prefix(None, "1.0") == b"MESSAGE\n"
    assert message_prefix(None, "1.0", (("redelivered", "true"),)) == (
        b"MESSAGE\nredelivered:true\n"
    )


@pytest.mark.parametrize("version", ["1.0", "1.1", "1.2"])
def test_prefix_and_tail_equal_encoded_message_frame(version: str) -> None:
    """
    message_prefix() + message_tail() is byte for byte encode() of the same MESSAGE, and parses
    back to it.
    """
    message = sample_message()
    frame = Frame(
        "MESSAGE",
        (
            ("subscription", "s-1"),
            ("ack", "s-1:m-1"),
            ("message-id", "m-1"),
            ("destination", "/topic/prices.eur"),
            ("content-type", "text/plain"),
            ("note", "a:b"),
            ("content-length", "7"),
        ),
        b"1.0825\0",
    )
    data = message_prefix("s-1", version, (("ack", "s-1:m-1"),)) + message_tail(message, version)
    assert data == encode(frame, version)
    assert parse(data, version) == [frame]


# -- ERROR frames ------------------------------------------------------------------------------


def test_error_frame_has_message_type_length_receipt_and_extra_headers() -> None:
    """
    An ERROR carries message, content-type, content-length, receipt-id, then extra headers
    (STOMP 1.2, ERROR).
    """
    frame = error_frame("bad frame", "détails", receipt_id="r-1", extra=(("version", "1.2"),))
    assert frame == Frame(
        "ERROR",
        (
            ("message", "bad frame"),
            ("content-type", "text/plain"),
            ("content-length", "8"),
            ("receipt-id", "r-1"),
            ("version", "1.2"),
        ),
        "détails".encode(),
    )


def test_error_frame_without_receipt_or_detail() -> None:
    """Without a receipt there is no receipt-id header, and without detail the body is empty."""
    frame = error_frame("bye")
    assert frame.headers == (
        ("message", "bye"),
        ("content-type", "text/plain"),
        ("content-length", "0"),
    )
    assert frame.body == b""


def test_error_frame_message_is_one_line_for_every_version() -> None:
    """Line breaks in the message become spaces, so the ERROR can be sent to a 1.0 client too."""
    frame = error_frame("one\ntwo\r\nthree\rfour")
    assert frame.get("message") == "one two three four"
    assert parse(encode(frame, "1.0"), "1.0") == [frame]


@pytest.mark.parametrize(
    "headers",
    [
        (),
        (("plain", "value"),),
        (("a", "1"), ("b", "2"), ("c", "")),
        (("colon:name", "v"),),
        (("n", "value:with:colons"),),
        (("n", "line\nfeed"),),
        (("n", "carriage\rreturn"),),
        (("n", "back\\slash"),),
        (("a", "1"), ("n", "x\ny"), ("b", "2")),
    ],
)
def test_message_tail_escapes_each_header_as_escape_does(headers: tuple) -> None:
    """
    Every name and value in a tail is escaped as escape() does, and parses back the same (STOMP 1.2,
    "Value Encoding").
    """
    message = Message(destination="/queue/q", message_id="m-2", headers=headers, body=b"x")
    expected = "".join(f"{escape(name)}:{escape(value)}\n" for name, value in headers)
    assert message_tail(message, "1.2") == (
        b"message-id:m-2\ndestination:/queue/q\n" + expected.encode() + b"content-length:1\n\nx\0\n"
    )
    [frame] = FrameParser().receive_data(message_prefix("s", "1.2") + message_tail(message, "1.2"))
    assert frame.headers[3:-1] == tuple(headers)


#: Header text a SEND can carry as plain lines: no colon, LF, CR or backslash.
_PLAIN_TEXT = st.text(st.characters(blacklist_characters=":\n\r\\", blacklist_categories=["Cs"]))


@given(
    headers=st.lists(st.tuples(_PLAIN_TEXT, _PLAIN_TEXT), min_size=1, max_size=5),
    destination=st.sampled_from(["/queue/q", "/queue/a:b", "/topic/back\\slash"]),
)
def test_a_message_holding_plain_lines_is_encoded_as_one_holding_pairs(
    headers: list[tuple[str, str]], destination: str
) -> None:
    """
    For every version, the tail of a message that holds its SEND's plain header lines is the
    tail of the same message holding pairs, escapes in its destination included.
    """
    lines = "\n".join(f"{name}:{value}" for name, value in headers).encode()
    for version in ("1.2", "1.1", "1.0"):
        held = Message(destination, "m-3", lines, b"body")
        assert message_tail(held, version) == message_tail(
            Message(destination, "m-3", tuple(headers), b"body"), version
        )
        assert held.headers == tuple(headers)
