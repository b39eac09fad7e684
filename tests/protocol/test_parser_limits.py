"""
The limits of :class:`stompbroker.protocol.parser.FrameParser`: each passes at its
boundary and fails one over it, and a peer that streams without end is refused as
soon as it breaks one, not when its frame is complete.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from stompbroker.protocol.errors import FrameTooLarge, HeaderTooLong, ProtocolError, TooManyHeaders
from stompbroker.protocol.parser import FrameParser
from tests.support.parsing import assert_parses, assert_rejects, parse_chunks

MiB = 1024 * 1024
KiB = 1024

LIMITS = [
    # max_frame_size counts the header section and the body: b"SEND\n\n" is 6 bytes.
    pytest.param(
        b"SEND\n\n" + b"x" * 10 + b"\0", {"max_frame_size": 16}, None, id="frame-at-limit"
    ),
    pytest.param(
        b"SEND\n\n" + b"x" * 11 + b"\0",
        {"max_frame_size": 16},
        FrameTooLarge,
        id="frame-over-limit",
    ),
    pytest.param(
        b"SEND\ncontent-length:10\n\n" + b"x" * 10 + b"\0",
        {"max_frame_size": 34},
        None,
        id="content-length-frame-at-limit",
    ),
    pytest.param(
        b"SEND\ncontent-length:10\n\n" + b"x" * 10 + b"\0",
        {"max_frame_size": 33},
        FrameTooLarge,
        id="content-length-frame-over-limit",
    ),
    pytest.param(
        b"SEND\r\n\r\n" + b"x" * 8 + b"\0",
        {"max_frame_size": 16},
        None,
        id="crlf-frame-at-limit",
    ),
    pytest.param(b"SEND\na:1\nb:2\nc:3\n\n\0", {"max_headers": 3}, None, id="headers-at-limit"),
    pytest.param(
        b"SEND\na:1\nb:2\nc:3\nd:4\n\n\0",
        {"max_headers": 3},
        TooManyHeaders,
        id="headers-over-limit",
    ),
    pytest.param(
        b"SEND\nfoo:" + b"x" * 16 + b"\n\n\0",
        {"max_header_length": 20},
        None,
        id="header-line-at-limit",
    ),
    pytest.param(
        b"SEND\nfoo:" + b"x" * 16 + b"\r\n\r\n\0",
        {"max_header_length": 20},
        None,
        id="crlf-header-line-at-limit",
    ),
    pytest.param(
        b"SEND\nfoo:" + b"x" * 17 + b"\n\n\0",
        {"max_header_length": 20},
        HeaderTooLong,
        id="header-line-over-limit",
    ),
    pytest.param(
        b"SEND\nfoo:" + b"x" * 17 + b"\r\n\r\n\0",
        {"max_header_length": 20},
        HeaderTooLong,
        id="crlf-header-line-over-limit",
    ),
    pytest.param(b"UNSUBSCRIBE\n\n\0", {"max_header_length": 11}, None, id="command-at-limit"),
    pytest.param(
        b"C" * 21 + b"\n\n\0",
        {"max_header_length": 20},
        HeaderTooLong,
        id="command-over-limit",
    ),
]

LIMIT_MESSAGES = {
    FrameTooLarge: r"^frame too large: more than \d+ bytes$",
    TooManyHeaders: r"^too many headers: more than \d+$",
    HeaderTooLong: r"^header line too long: more than \d+ bytes$",
}


@pytest.mark.parametrize("data, limits, error", LIMITS)
def test_limit_passes_at_boundary_and_fails_one_over(
    data: bytes, limits: dict[str, int], error: type[ProtocolError] | None
) -> None:
    """
    A frame exactly at a limit parses, one byte or header over it fails with an ERROR-ready
    message.
    """
    if error is None:
        assert len(parse_chunks([data], **limits)) == 1
        assert_parses(data, parse_chunks([data], **limits), **limits)
    else:
        assert_rejects(data, error, LIMIT_MESSAGES[error], **limits)


def feed_until_error(parser: FrameParser, chunks: Iterator[bytes]) -> tuple[ProtocolError, int]:
    """:returns: the error the parser raised, and how many bytes it had been fed by then."""
    fed = 0
    for chunk in chunks:
        fed += len(chunk)
        try:
            parser.receive_data(chunk)
        except ProtocolError as error:
            return error, fed
    raise AssertionError("the parser never failed")


def test_body_without_nul_fails_as_soon_as_over_the_limit() -> None:
    """
    A peer streaming megabytes with no NUL is refused as soon as the frame exceeds
    max_frame_size, not buffered.
    """
    parser = FrameParser(max_frame_size=4 * MiB)
    chunks = iter([b"SEND\ndestination:/queue/a\n\n"] + [b"x" * (64 * KiB)] * 200)
    error, fed = feed_until_error(parser, chunks)
    assert isinstance(error, FrameTooLarge)
    assert 4 * MiB < fed <= 4 * MiB + 64 * KiB


def test_header_section_without_end_fails_as_soon_as_over_the_frame_limit() -> None:
    """Megabytes of header lines with no empty line fail once over max_frame_size."""
    parser = FrameParser(max_frame_size=4 * MiB, max_headers=10**9)
    lines = (b"x:" + b"y" * 1021 + b"\n") * 64
    chunks = iter([b"SEND\n"] + [lines] * 200)
    error, fed = feed_until_error(parser, chunks)
    assert isinstance(error, FrameTooLarge)
    assert 4 * MiB < fed <= 4 * MiB + 64 * KiB


def test_endless_header_line_fails_as_soon_as_over_the_line_limit() -> None:
    """
    A header line that never ends is refused once max_header_length bytes are buffered without a
    newline.
    """
    parser = FrameParser()
    chunks = iter([b"SEND\nfoo:"] + [b"x" * KiB] * 100)
    error, fed = feed_until_error(parser, chunks)
    assert isinstance(error, HeaderTooLong)
    assert 10 * KiB < fed <= 11 * KiB + 9


def test_line_over_the_limit_fails_before_its_header_section_ends() -> None:
    """
    A complete but too long header line is refused even while the header section is still open.
    """
    parser = FrameParser(max_header_length=20)
    parser.receive_data(b"SEND\n")
    with pytest.raises(HeaderTooLong):
        parser.receive_data(b"foo:" + b"x" * 30 + b"\nbar:1\n")


def test_endless_headers_fail_as_soon_as_over_the_header_limit() -> None:
    """Header lines beyond max_headers are refused before the header section ends."""
    parser = FrameParser(max_headers=10)
    assert parser.receive_data(b"SEND\n" + b"x:y\n" * 10) == []
    with pytest.raises(TooManyHeaders):
        parser.receive_data(b"x:y\n")


def test_huge_content_length_fails_at_once() -> None:
    """
    A content-length announcing a body that cannot fit is refused before any of the body
    arrives.
    """
    parser = FrameParser()
    with pytest.raises(FrameTooLarge, match="^frame too large: more than 104857600 bytes$"):
        parser.receive_data(b"SEND\ndestination:/queue/a\ncontent-length:1000000000\n\n")
