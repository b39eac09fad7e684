"""
Tests for :class:`stompbroker.protocol.parser.FrameParser`; its limits are tested in
``test_parser_limits.py``.

Every table case is fed three ways (STYLE §10): whole, split in two at every
index, and one byte at a time, because a transport may cut the stream anywhere.
"""

from __future__ import annotations

import attrs
import pytest

from stompbroker.protocol.errors import (
    FrameTooLarge,
    MalformedFrame,
    ProtocolError,
)
from stompbroker.protocol.frames import Frame
from stompbroker.protocol.parser import FrameParser
from tests.support.parsing import assert_parses, assert_rejects, chunkings, parse_chunks

# -- well-formed input ------------------------------------------------------------

SEND = Frame("SEND", (("destination", "/queue/a"),), b"hello")

WELL_FORMED = [
    pytest.param(b"SEND\ndestination:/queue/a\n\nhello\0", [SEND], {}, id="lf"),
    pytest.param(b"SEND\r\ndestination:/queue/a\r\n\r\nhello\0", [SEND], {}, id="crlf"),
    pytest.param(b"SEND\ndestination:/queue/a\r\n\nhello\0", [SEND], {}, id="mixed-eols"),
    pytest.param(b"DISCONNECT\n\n\0", [Frame("DISCONNECT")], {}, id="no-headers"),
    pytest.param(b"DISCONNECT\r\n\r\n\0", [Frame("DISCONNECT")], {}, id="no-headers-crlf"),
    pytest.param(
        b"\n\r\n\nSEND\ndestination:/queue/a\n\nhello\0", [SEND], {}, id="eols-before-first"
    ),
    pytest.param(
        b"SEND\ndestination:/queue/a\n\nhello\0\n\r\n\nDISCONNECT\n\n\0\n\n",
        [SEND, Frame("DISCONNECT")],
        {},
        id="eols-between-and-after",
    ),
    pytest.param(
        b"ACK\n\n\0BEGIN\nx:1\n\n2\0COMMIT\r\n\r\n3\0",
        [Frame("ACK"), Frame("BEGIN", (("x", "1"),), b"2"), Frame("COMMIT", (), b"3")],
        {},
        id="several-frames",
    ),
    pytest.param(b"\n\r\n\n", [], {}, id="heart-beats-only"),
    pytest.param(
        b"SEND\ncontent-length:7\n\na\0b\n\nc\0\0",
        [Frame("SEND", (("content-length", "7"),), b"a\0b\n\nc\0")],
        {},
        id="content-length-body-with-nul",
    ),
    pytest.param(
        b"SEND\ncontent-length:0\n\n\0",
        [Frame("SEND", (("content-length", "0"),), b"")],
        {},
        id="content-length-zero",
    ),
    pytest.param(
        b"SEND\ncontent-length:007\n\n1234567\0",
        [Frame("SEND", (("content-length", "007"),), b"1234567")],
        {},
        id="content-length-leading-zeros",
    ),
    pytest.param(
        b"SEND\ncontent-length:2\ncontent-length:5\n\nab\0",
        [Frame("SEND", (("content-length", "2"), ("content-length", "5")), b"ab")],
        {},
        id="first-content-length-wins",
    ),
    pytest.param(
        b"SEND\n\nline 1\nline 2\r\n\nx:y\n\0",
        [Frame("SEND", (), b"line 1\nline 2\r\n\nx:y\n")],
        {},
        id="body-to-first-nul",
    ),
    pytest.param(
        b"SEND\nfoo:1\nbar:2\nfoo:3\n\n\0",
        [Frame("SEND", (("foo", "1"), ("bar", "2"), ("foo", "3")))],
        {},
        id="repeated-headers-keep-order",
    ),
    pytest.param(
        b"SEND\nurl:tcp://host:61613/a\n\n\0",
        [Frame("SEND", (("url", "tcp://host:61613/a"),))],
        {"version": "1.0"},
        id="colon-in-value",
    ),
    pytest.param(
        b"SEND\nfoo:\n:bar\n\n\0",
        [Frame("SEND", (("foo", ""), ("", "bar")))],
        {},
        id="empty-value-and-name",
    ),
    pytest.param(
        "SEND\nключ:значение ✓\n\n\0".encode(),
        [Frame("SEND", (("ключ", "значение ✓"),))],
        {},
        id="utf-8-headers",
    ),
    pytest.param(
        b"SEND\na\\cb\\\\:c\\nd\\re\\\\f\\c\n\n\0",
        [Frame("SEND", (("a:b\\", "c\nd\re\\f:"),))],
        {"version": "1.2"},
        id="escapes-1.2",
    ),
    pytest.param(
        b"SEND\na\\cb:c\\nd\\re\\\\f\n\n\0",
        [Frame("SEND", (("a:b", "c\nd\re\\f"),))],
        {"version": "1.1"},
        id="escapes-1.1-with-lenient-cr",
    ),
    pytest.param(
        b"SEND\na\\cb:c\\nd\\t\\\n\n\0",
        [Frame("SEND", (("a\\cb", "c\\nd\\t\\"),))],
        {"version": "1.0"},
        id="no-escapes-1.0",
    ),
    pytest.param(
        b"CONNECT\naccept-version:1.2\nlogin:a\\cb\\t\n\n\0",
        [Frame("CONNECT", (("accept-version", "1.2"), ("login", "a\\cb\\t")))],
        {"version": "1.2"},
        id="no-escapes-connect",
    ),
    pytest.param(
        b"STOMP\naccept-version:1.2\npasscode:\\\n\n\0",
        [Frame("STOMP", (("accept-version", "1.2"), ("passcode", "\\")))],
        {"version": "1.2"},
        id="no-escapes-stomp",
    ),
    pytest.param(
        b"CONNECTED\nversion:1.2\nserver:a\\nb\n\n\0",
        [Frame("CONNECTED", (("version", "1.2"), ("server", "a\\nb")))],
        {"version": "1.2"},
        id="no-escapes-connected",
    ),
    pytest.param(
        b"SEND\nfoo:a\rb\n\n\0",
        [Frame("SEND", (("foo", "a\rb"),))],
        {"version": "1.0"},
        id="cr-inside-a-line-is-kept",
    ),
    pytest.param(
        b"SEND\ndestination: /queue/a\nx : 1 \n\thelp\t:\tme\n\nhello\0",
        [Frame("SEND", (("destination", "/queue/a"), ("x", "1"), ("help", "me")), b"hello")],
        {"version": "1.0"},
        id="blanks-trimmed-1.0",
    ),
    pytest.param(
        b"SEND\r\ndestination: /queue/a \r\n\r\nhello\0",
        [SEND],
        {"version": "1.0"},
        id="blanks-trimmed-1.0-crlf",
    ),
    pytest.param(
        b"SEND\ndestination: /queue/a\ncontent-length: 3 \n\na\0b\0",
        [Frame("SEND", (("destination", "/queue/a"), ("content-length", "3")), b"a\0b")],
        {"version": "1.0"},
        id="content-length-trimmed-1.0",
    ),
    pytest.param(
        b"SEND\ncontent-length :3\n\na\0b\0",
        [Frame("SEND", (("content-length", "3"),), b"a\0b")],
        {"version": "1.0"},
        id="content-length-name-trimmed-1.0",
    ),
    pytest.param(
        b"CONNECT\nlogin: guest\npasscode: secret\n\n\0",
        [Frame("CONNECT", (("login", "guest"), ("passcode", "secret")))],
        {"version": "1.2"},
        id="blanks-trimmed-connect-that-settles-on-1.0",
    ),
    pytest.param(
        b"SEND\ndestination: /queue/a\nx :1 \n\n\0",
        [Frame("SEND", (("destination", " /queue/a"), ("x ", "1 ")))],
        {"version": "1.1"},
        id="blanks-kept-1.1",
    ),
    pytest.param(
        b"CONNECT\naccept-version:1.0,1.2\nlogin: guest\n\n\0",
        [Frame("CONNECT", (("accept-version", "1.0,1.2"), ("login", " guest")))],
        {"version": "1.2"},
        id="blanks-kept-connect-that-settles-on-1.2",
    ),
]


@pytest.mark.parametrize("data, expected, options", WELL_FORMED)
def test_well_formed_stream_parses_in_any_chunking(
    data: bytes, expected: list[Frame], options: dict[str, object]
) -> None:
    """
    Each well-formed stream yields the same frames however it is chunked (STOMP 1.2, Augmented
    BNF).
    """
    assert_parses(data, expected, **options)


def test_repeated_header_first_value_wins() -> None:
    """
    Repeated headers are all kept, and lookup returns the first (STOMP 1.2, Repeated Header
    Entries).
    """
    [frame] = FrameParser().receive_data(b"MESSAGE\nfoo:World\nfoo:Hello\n\n\0")
    assert frame.headers == (("foo", "World"), ("foo", "Hello"))
    assert frame.get("foo") == "World"


def test_incomplete_frame_is_kept_until_completed() -> None:
    """Bytes of an unfinished frame are buffered and yield nothing until its NUL arrives."""
    parser = FrameParser()
    assert parser.receive_data(b"SEND\ndestination:/queue/a\n\nhel") == []
    assert parser.receive_data(b"lo") == []
    assert parser.receive_data(b"\0SEND") == [SEND]
    assert parser.receive_data(b"\n\n\0") == [Frame("SEND")]


def test_bytes_like_input_is_copied_before_the_caller_reuses_it() -> None:
    """A bytearray the transport refills after the call does not change the frames or the buffer."""
    parser = FrameParser()
    chunk = bytearray(b"SEND\n\nab\0SEND\n\ncd")
    [first] = parser.receive_data(chunk)
    chunk[:] = b"\0" * len(chunk)
    assert parser.receive_data(memoryview(b"e\0")) == [Frame("SEND", (), b"cde")]
    assert first == Frame("SEND", (), b"ab")


def test_large_body_fed_one_byte_at_a_time_parses() -> None:
    """A 64 KiB body fed a byte per call parses to the same frame as when fed whole."""
    body = bytes(range(1, 256)) * 257
    data = b"SEND\ndestination:/queue/a\n\n" + body + b"\0"
    parser = FrameParser()
    frames = []
    for index in range(len(data)):
        frames += parser.receive_data(data[index : index + 1])
    assert frames == [Frame("SEND", (("destination", "/queue/a"),), body)]


# -- versions ------------------------------------------------------------------------


def test_version_defaults_to_1_2_and_rejects_unknown_versions() -> None:
    """
    The parser starts out unescaping as STOMP 1.2 does, and refuses to be set to a version STOMP
    does not have.
    """
    parser = FrameParser()
    assert parser.version == "1.2"
    with pytest.raises(ValueError):
        parser.version = "2.0"


@pytest.mark.parametrize(
    "connect, version",
    [
        (b"CONNECT\naccept-version:1.0,1.1\nhost:a\n\n\0", "1.1"),
        (b"STOMP\naccept-version:1.2, 1.0\nhost:a\n\n\0", "1.2"),
        (b"CONNECT\nhost:a\n\n\0", "1.0"),
        (b"CONNECTED\nversion:1.1\n\n\0", "1.1"),
        (b"CONNECTED\n\n\0", "1.0"),
        (b"CONNECT\naccept-version:2.0\n\n\0", "1.2"),
    ],
)
def test_connect_frame_sets_version_for_pipelined_frames(connect: bytes, version: str) -> None:
    """
    Frames sent right behind a CONNECT, in the same chunk, are unescaped by the version it will
    most likely negotiate (STOMP 1.2, Protocol Negotiation).
    """
    parser = FrameParser()
    frames = parser.receive_data(connect + b"SEND\nfoo:a\\\\b\n\n\0")
    assert parser.version == version
    expected = "a\\\\b" if version == "1.0" else "a\\b"
    assert frames[1].headers == (("foo", expected),)


# -- malformed input ---------------------------------------------------------------

MALFORMED = [
    pytest.param(
        b"SEND\nfoo\n\n\0",
        MalformedFrame,
        r"^header line without a colon: 'foo'$",
        {},
        id="no-colon",
    ),
    pytest.param(
        b"SEND\r\ndestination:/a\r\nfoo\r\n\r\n\0",
        MalformedFrame,
        r"^header line without a colon: 'foo'$",
        {},
        id="no-colon-crlf",
    ),
    pytest.param(
        b"SEND\n" + b"y" * 100 + b"\n\n\0",
        MalformedFrame,
        r"^header line without a colon: 'y{60}\.\.\.'$",
        {},
        id="no-colon-long-line-truncated",
    ),
    pytest.param(
        b"SEND\nfoo:a\\tb\n\n\0",
        MalformedFrame,
        r"^undefined escape sequence '\\\\t' in a header$",
        {"version": "1.2"},
        id="undefined-escape-1.2",
    ),
    pytest.param(
        b"SEND\nfoo\\x:a\n\n\0",
        MalformedFrame,
        r"^undefined escape sequence",
        {"version": "1.1"},
        id="undefined-escape-in-name-1.1",
    ),
    pytest.param(
        b"SEND\nfoo:a\\\n\n\0",
        MalformedFrame,
        r"^undefined escape sequence '\\\\' in a header$",
        {},
        id="trailing-backslash",
    ),
    pytest.param(
        b"SEND\ncontent-length:abc\n\nabc\0",
        MalformedFrame,
        r"^invalid content-length: 'abc'$",
        {},
        id="content-length-not-a-number",
    ),
    pytest.param(
        b"SEND\ncontent-length:-1\n\n\0",
        MalformedFrame,
        r"^invalid content-length: '-1'$",
        {},
        id="content-length-negative",
    ),
    pytest.param(
        b"SEND\ncontent-length:\n\n\0",
        MalformedFrame,
        r"^invalid content-length: ''$",
        {},
        id="content-length-empty",
    ),
    pytest.param(
        b"SEND\ncontent-length: 1\n\na\0",
        MalformedFrame,
        r"^invalid content-length: ' 1'$",
        {},
        id="content-length-with-space",
    ),
    pytest.param(
        "SEND\ncontent-length:١\n\na\0".encode(),
        MalformedFrame,
        r"^invalid content-length",
        {},
        id="content-length-non-ascii-digit",
    ),
    pytest.param(
        b"SEND\ncontent-length:3\n\nabcd\0",
        MalformedFrame,
        r"^frame body is not terminated by NUL after content-length 3$",
        {},
        id="no-nul-after-content-length",
    ),
    pytest.param(
        b"SEND\nfoo:\xff\xfe\n\n\0",
        MalformedFrame,
        r"^header section is not valid UTF-8$",
        {},
        id="invalid-utf-8-header",
    ),
    pytest.param(
        b"\xc3\n\n\0",
        MalformedFrame,
        r"^header section is not valid UTF-8$",
        {},
        id="invalid-utf-8-command",
    ),
]


@pytest.mark.parametrize("data, error, match, options", MALFORMED)
def test_malformed_frame_is_rejected_with_readable_message(
    data: bytes, error: type[ProtocolError], match: str, options: dict[str, object]
) -> None:
    """
    Each kind of malformed frame raises its own error class with a message fit for an ERROR
    frame (STOMP 1.2, ERROR).
    """
    raised = assert_rejects(data, error, match, **options)
    assert raised.detail


def test_body_may_hold_invalid_utf_8() -> None:
    """Bodies are bytes, never decoded, so any octets are accepted (STOMP 1.2, Body)."""
    assert_parses(b"SEND\n\n\xff\xfe\0", [Frame("SEND", (), b"\xff\xfe")])


RECEIPTED = [
    pytest.param(
        b"SEND\nreceipt:r-1\ncontent-length:3\n\nabcd\0",
        MalformedFrame,
        {},
        id="no-nul-after-content-length",
    ),
    pytest.param(
        b"SEND\nreceipt:r-1\ncontent-length:x\n\n\0", MalformedFrame, {}, id="bad-content-length"
    ),
    pytest.param(
        b"SEND\nreceipt:r-1\ncontent-length:100\n\n",
        FrameTooLarge,
        {"max_frame_size": 50},
        id="content-length-too-large",
    ),
    pytest.param(
        b"SEND\nreceipt:r-1\n\n" + b"x" * 60,
        FrameTooLarge,
        {"max_frame_size": 50},
        id="body-too-large",
    ),
]


@pytest.mark.parametrize("data, error, limits", RECEIPTED)
def test_error_after_headers_carries_receipt_id(
    data: bytes, error: type[ProtocolError], limits: dict[str, int]
) -> None:
    """
    An error found once the headers are parsed names the frame's receipt, for the ERROR's
    receipt-id (STOMP 1.2, ERROR).
    """
    raised = assert_rejects(data, error, None, **limits)
    assert raised.receipt_id == "r-1"


def test_receipt_id_is_unescaped() -> None:
    """
    The receipt_id of an error is the receipt header's decoded value (STOMP 1.2, Value
    Encoding).
    """
    with pytest.raises(MalformedFrame) as caught:
        FrameParser().receive_data(b"SEND\nreceipt:r\\c1\ncontent-length:1\n\nab\0")
    assert caught.value.receipt_id == "r:1"


def test_parser_stays_dead_after_an_error() -> None:
    """
    After a protocol error every further call raises the same error, since the stream cannot be
    resynchronised.
    """
    parser = FrameParser()
    with pytest.raises(MalformedFrame) as first:
        parser.receive_data(b"SEND\nfoo\n\n\0")
    with pytest.raises(MalformedFrame) as second:
        parser.receive_data(b"SEND\n\n\0")
    assert second.value is first.value


def test_frames_before_a_fault_in_the_same_chunk_are_returned() -> None:
    """A good frame followed by a bad one in one chunk is returned; the fault waits in ``error``."""
    parser = FrameParser()
    good = b"SEND\ndestination:/queue/a\n\nkept\x00"
    frames = parser.receive_data(good + b"SEND\nno colon\n\n\x00")
    assert frames == [Frame("SEND", (("destination", "/queue/a"),), b"kept")]
    assert isinstance(parser.error, MalformedFrame)
    with pytest.raises(MalformedFrame):
        parser.receive_data(b"")


def test_error_is_none_while_the_parser_is_alive() -> None:
    """``error`` stays ``None`` until a fault."""
    parser = FrameParser()
    parser.receive_data(b"SEND\ndestination:/queue/a\n\n")
    assert parser.error is None


# -- where a header section ends -------------------------------------------------------

SECTION_ENDS = [
    pytest.param(
        b"SEND\r\nx:1\r\n\r\na\0SEND\nx:2\n\nb\0",
        [Frame("SEND", (("x", "1"),), b"a"), Frame("SEND", (("x", "2"),), b"b")],
        id="lf-frame-after-crlf-frame",
    ),
    pytest.param(
        b"ACK\r\n\r\n\0BEGIN\r\nx:1\n\n\0",
        [Frame("ACK"), Frame("BEGIN", (("x", "1"),))],
        id="crlf-command-line-then-lf-lf-after-crlf-frame",
    ),
    pytest.param(
        b"SEND\r\nx:1\r\n\r\na\n\nb\0",
        [Frame("SEND", (("x", "1"),), b"a\n\nb")],
        id="crlf-section-then-lf-lf-in-body",
    ),
    pytest.param(
        b"SEND\n\na\rb\0SEND\nx:1\n\n\0",
        [Frame("SEND", (), b"a\rb"), Frame("SEND", (("x", "1"),))],
        id="cr-in-a-body-then-lf-frame",
    ),
    pytest.param(
        b"SEND\nx:1\n\r\n\nb\0",
        [Frame("SEND", (("x", "1"),), b"\nb")],
        id="lf-crlf-before-lf-lf",
    ),
]


@pytest.mark.parametrize("data, expected", SECTION_ENDS)
def test_header_section_ends_at_its_first_empty_line(data: bytes, expected: list[Frame]) -> None:
    """
    A header section ends at its first empty line, whether LF or CRLF ends it and whatever
    line ends the frames before it used (STOMP 1.2, Augmented BNF).
    """
    assert_parses(data, expected)


def test_frame_has_only_the_fields_the_parser_sets() -> None:
    """
    The parser builds frames by setting command, headers, body and raw directly, which is right
    only while Frame has exactly those fields and validates or converts none of them.
    """
    fields = attrs.fields(Frame)
    assert [field.name for field in fields] == ["command", "headers", "body", "raw"]
    assert all(field.validator is None and field.converter is None for field in fields)


@pytest.mark.parametrize(
    ("data", "raws"),
    [
        (
            b"SEND\ndestination:/q\nseq:1\ncontent-length:2\n\nab\0SEND\ndestination:/r\n\n\0",
            [b"destination:/q\nseq:1\ncontent-length:2", b"destination:/r"],
        ),
        (b"\nSEND\nx:a\\cb\n\n\0SEND\nx:a\\\\b\n\n\0", [None, None]),
        (b"SEND\r\ndestination:/q\r\n\r\n\0SEND\ndestination:/q\n\n\0", [None, b"destination:/q"]),
        (b"ACK\nid:1\n\n\0MESSAGE\ndestination:/q\n\n\0", [None, None]),
    ],
    ids=["lf", "escaped", "crlf then lf", "other commands"],
)
def test_a_send_keeps_its_header_lines_as_they_came(data: bytes, raws: list[bytes | None]) -> None:
    """
    A SEND read with LF line ends and no backslash keeps its header lines unsplit, as bytes
    however the stream was cut (Frame.raw); a CRLF SEND, one with a backslash, and every other
    command, keeps none.
    """
    for chunks in chunkings(data):
        frames = parse_chunks(chunks)
        assert [frame.raw for frame in frames] == raws, f"fed as {chunks!r}"
        assert all(raw is None or type(raw) is bytes for raw in raws)
