"""
Hostile input for :class:`~stompbroker.protocol.parser.FrameParser`: random bytes
and mutated valid frames, cut into chunks anywhere.

Whatever arrives, the parser must either return frames or raise a
:class:`~stompbroker.protocol.errors.ProtocolError` subclass (which the session
turns into an ERROR frame and a close), never any other exception; it must
never hold more than ``max_frame_size`` bytes of input; every frame it returns
must be within the limits; and the chunking must not change the outcome.  Small
limits make the mutated streams run into every limit.  The session's stateful
fuzzing is in ``tests/protocol/test_session_fuzz.py``.
"""

from __future__ import annotations

import re

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from stompbroker.protocol.encoder import encode
from stompbroker.protocol.errors import MalformedFrame, ProtocolError, UnknownCommand
from stompbroker.protocol.frames import (
    CLIENT_COMMANDS,
    SERVER_COMMANDS,
    UNESCAPED_COMMANDS,
    Frame,
)
from stompbroker.protocol.parser import FrameParser
from tests import strategies

LIMITS = {"max_frame_size": 200, "max_headers": 5, "max_header_length": 48}

VERSIONS = st.sampled_from(["1.0", "1.1", "1.2"])

#: Bytes with a meaning in STOMP's syntax, and fragments that steer the parser
#: into its less travelled states.
SPECIAL = st.sampled_from(
    [
        b"\0",
        b"\r",
        b"\n",
        b"\r\n",
        b"\n\n",
        b":",
        b"\\",
        b"\\c",
        b"\\x",
        b"\xff",
        b"\xc3",
        b"\ncontent-length:",
        b"content-length:3\n",
        b"content-length:99999999999999999999\n",
        b"content-length:-1\n",
        b"\nCONNECT\naccept-version:1.0\n\n\0",
        b"x" * 60,
    ]
)


def buffered(parser: FrameParser) -> int:
    """
    How many input bytes the parser holds.  The parser keeps no public count, and
    this bound is the point of the test, so the test reads its private buffer.
    """
    return len(parser._buffer)


def parse(
    chunks: list[bytes], version: str
) -> tuple[list[Frame], type[ProtocolError] | None, FrameParser]:
    """
    Feed chunks to a fresh parser with the test limits, checking the buffer after each.

    :returns: the frames, the type of the error that ended the stream (if any), and
        the parser.
    """
    parser = FrameParser(**LIMITS)
    parser.version = version
    frames: list[Frame] = []
    for chunk in chunks:
        try:
            frames.extend(parser.receive_data(chunk))
        except ProtocolError as error:
            assert error.message and "\n" not in error.message
            return frames, type(error), parser
        if parser.error is not None:
            # Frames completed before the fault came back with it.
            return frames, type(parser.error), parser
        assert buffered(parser) <= LIMITS["max_frame_size"]
    return frames, None, parser


def assert_within_limits(frames: list[Frame]) -> None:
    for frame in frames:
        assert isinstance(frame.command, str) and isinstance(frame.body, bytes)
        assert len(frame.headers) <= LIMITS["max_headers"]
        assert len(frame.body) <= LIMITS["max_frame_size"]
        for name, value in frame.headers:
            assert isinstance(name, str) and isinstance(value, str)


def assert_same_in_any_chunking(data: bytes, chunks: list[bytes], version: str) -> None:
    """
    The whole stream, the given chunking and one byte at a time end alike: in an
    error in all three or in none, with the same frames before it.

    One difference is allowed, and known: a frame that breaks several rules may be
    refused for another of them when it arrives in pieces (a partial header section
    is checked for line and header counts before it is parsed).  Every frame
    completed before the fault is returned, however the stream was cut.
    """
    bytewise = parse([data[i : i + 1] for i in range(len(data))], version)
    assert_within_limits(bytewise[0])
    for frames, error_type, parser in (parse([data], version), parse(chunks, version)):
        assert (error_type is None) == (bytewise[1] is None)
        assert frames == bytewise[0]
        if error_type is not None:
            assert_dead(parser, error_type)


def assert_dead(parser: FrameParser, error_type: type[ProtocolError]) -> None:
    """After an error the parser holds no input and raises the same error for anything more."""
    assert buffered(parser) == 0
    with pytest.raises(error_type):
        parser.receive_data(b"SEND\n\n\0")
    assert buffered(parser) == 0


@st.composite
def cut(draw: st.DrawFn, data: bytes) -> list[bytes]:
    """``data`` cut at arbitrary points."""
    return draw(strategies.split(data))


#: Commands, some of them unescaped or unknown (the parser refuses those, in any chunking).
COMMANDS = st.sampled_from(["SEND", "SUBSCRIBE", "MESSAGE", "CONNECT", "STOMP", "ACK", "X"])


@st.composite
def encoded_frames(draw: st.DrawFn, version: str) -> bytes:
    """
    One valid frame for ``version``, encoded.  The alphabet is small and cheap to
    draw (the round-trip tests cover the rest of Unicode); mutations do the damage.
    """
    command = draw(COMMANDS)
    raw = version == "1.0" or command in UNESCAPED_COMMANDS
    names = st.text("abé\\\0" if raw else "ab:é\\\r\n\0", max_size=5)
    values = st.text("ab:é\\\0" if raw else "ab:é\\\r\n\0", max_size=5)
    headers = draw(st.lists(st.tuples(names, values), max_size=4))
    if command in UNESCAPED_COMMANDS and draw(st.booleans()):
        headers.insert(0, ("accept-version", draw(st.sampled_from(["1.0", "1.1", "1.2,1.0"]))))
    body = draw(st.binary(max_size=40))
    if b"\0" in body or draw(st.booleans()):
        headers.insert(draw(st.integers(0, len(headers))), ("content-length", str(len(body))))
    return encode(Frame(command, tuple(headers), body), version)


@st.composite
def valid_streams(draw: st.DrawFn, version: str) -> bytes:
    """A few valid frames for ``version``, with heart-beats between them."""
    frames = draw(st.lists(encoded_frames(version), min_size=1, max_size=3))
    return b"".join(draw(strategies.heart_beats) + frame for frame in frames)


@st.composite
def mutated(draw: st.DrawFn, data: bytes) -> bytes:
    """``data`` after one to four bit flips, truncations, duplications, insertions or deletions."""
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["flip", "truncate", "duplicate", "insert", "delete"]))
        start = draw(st.integers(0, len(data)))
        stop = draw(st.integers(start, len(data)))
        if kind == "flip" and start < len(data):
            flipped = data[start] ^ (1 << draw(st.integers(0, 7)))
            data = data[:start] + bytes([flipped]) + data[start + 1 :]
        elif kind == "truncate":
            data = data[:start]
        elif kind == "duplicate":
            data = data[:stop] + data[start:stop] + data[stop:]
        elif kind == "insert":
            data = data[:start] + draw(SPECIAL) + data[start:]
        elif kind == "delete":
            data = data[:start] + data[stop:]
    return data


@given(
    st.data(),
    st.integers(0, 600).flatmap(lambda size: st.binary(min_size=size, max_size=size)),
    VERSIONS,
)
def test_random_bytes_give_frames_or_a_protocol_error(
    data: st.DataObject, stream: bytes, version: str
) -> None:
    """Arbitrary bytes, in any chunking, end in frames or a ProtocolError, within the limits."""
    assert_same_in_any_chunking(stream, data.draw(cut(stream)), version)


@given(st.data(), VERSIONS)
def test_mutated_frames_give_frames_or_a_protocol_error(data: st.DataObject, version: str) -> None:
    """
    Valid frames after bit flips, truncation, duplication and inserted NUL, CR, LF, colon or
    backslash end in frames or a ProtocolError, the same in any chunking.
    """
    stream = data.draw(mutated(data.draw(valid_streams(version))))
    assert_same_in_any_chunking(stream, data.draw(cut(stream)), version)


@given(st.data(), VERSIONS)
def test_special_bytes_alone_give_frames_or_a_protocol_error(
    data: st.DataObject, version: str
) -> None:
    """Streams made only of STOMP's syntax bytes and fragments end in frames or a ProtocolError."""
    stream = b"".join(data.draw(st.lists(SPECIAL, max_size=30)))
    assert_same_in_any_chunking(stream, data.draw(cut(stream)), version)


@pytest.mark.parametrize(
    "pattern",
    [b"x", b"SEND\n", b"a:b\n", b"\r", b"SEND\ncontent-length:150\n\n" + b"y" * 150],
)
def test_endless_input_is_refused_before_the_buffer_outgrows_the_limit(pattern: bytes) -> None:
    """A stream without NUL, end of headers or end of header lines is refused within a frame."""
    parser = FrameParser(**LIMITS)
    with pytest.raises(ProtocolError):
        for _ in range(1000):
            parser.receive_data(pattern)
            assert buffered(parser) <= LIMITS["max_frame_size"]


@pytest.mark.parametrize("beat", [b"\n", b"\r\n"])
def test_endless_heart_beats_hold_no_memory(beat: bytes) -> None:
    """EOLs between frames are consumed as they come: a peer that only beats costs nothing."""
    parser = FrameParser(**LIMITS)
    for _ in range(1000):
        assert parser.receive_data(beat * 7) == []
        assert buffered(parser) <= 1


@pytest.mark.parametrize(
    "data, error",
    [
        (b"FROB\n", UnknownCommand),
        (b"\n\r\nFROB\r\n", UnknownCommand),
        (b"\xc3\x28\n", MalformedFrame),
        (b"SEND\ndestination:/queue/a\nno colon here\n", MalformedFrame),
        (b"SEND\nx:\xff\xfe\n", MalformedFrame),
    ],
)
def test_a_line_that_cannot_be_stomp_is_refused_when_its_eol_arrives(
    data: bytes, error: type[ProtocolError]
) -> None:
    """
    Issue 14: a command line that names no STOMP command, or a header line without a colon or
    not UTF-8, is refused as soon as its EOL arrives, with no empty line ending the section.
    """
    with pytest.raises(error):
        FrameParser().receive_data(data)


@pytest.mark.parametrize(
    "data", [b"SEN", b"SEND\ndestination:/que", b"SEND\nx:\xc3", b"\n\r\n", b"SEND\r", b"\r"]
)
def test_a_line_without_its_eol_yet_waits(data: bytes) -> None:
    """A partial line, heart-beat EOLs, and a CR that may start a CRLF are judged later."""
    parser = FrameParser()
    assert parser.receive_data(data) == []
    assert parser.error is None


COMMAND_NAMES = CLIENT_COMMANDS | SERVER_COMMANDS
LEADING_EOLS = re.compile(rb"^(?:\r?\n)+")


@given(st.binary(min_size=1, max_size=4096))
def test_random_bytes_after_connect_are_refused_within_the_read(garbage: bytes) -> None:
    """
    Issue 14: random bytes (with an EOL somewhere) after a CONNECT are refused by the read that
    brings them, unless their first line is a STOMP command, rather than at the frame timeout.
    """
    stream = garbage + b"\n"
    frame = LEADING_EOLS.sub(b"", stream)  # heart-beats before a frame are no fault
    assume(frame)
    first_line = frame.split(b"\n", 1)[0].removesuffix(b"\r")
    assume(first_line.decode("utf-8", "replace") not in COMMAND_NAMES)
    parser = FrameParser()
    [connect] = parser.receive_data(b"CONNECT\naccept-version:1.2\nhost:/\n\n\0")
    assert connect.command == "CONNECT"
    with pytest.raises(ProtocolError):
        parser.receive_data(stream)
