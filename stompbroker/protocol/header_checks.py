"""
Judging a frame's header section: the limits it may break, the lines that show it
cannot be STOMP, and the error each fault is reported with.

The frame parser (:mod:`stompbroker.protocol.parser`) finds frames; it calls into
this module only off its common path: when a header section is incomplete at the
end of a read (its complete lines are judged at once, so that a peer streaming
garbage or an endless line is refused when the line shows it, not at the frame
timeout), when a complete one is large enough to break a limit, and to build the
error for a fault it found.  Every function here is pure; the limits are passed
in, as the parser holds them.
"""

from __future__ import annotations

from stompbroker.protocol.errors import (
    FrameTooLarge,
    HeaderTooLong,
    MalformedFrame,
    TooManyHeaders,
    UnknownCommand,
)
from stompbroker.protocol.frames import CLIENT_COMMANDS, SERVER_COMMANDS, Headers
from stompbroker.protocol.header_decoding import receipt_of

__all__ = [
    "COMMANDS",
    "check_header_section_size",
    "check_line_length",
    "check_partial_header",
    "content_length_error",
    "frame_too_large",
    "no_colon",
    "not_utf8",
    "shown_line",
    "too_many_headers",
    "unknown_command",
]

#: Every command line a STOMP frame may have, in either direction (the parser
#: reads the server's frames in clients and tests too).
COMMANDS = CLIENT_COMMANDS | SERVER_COMMANDS

_CR = 0x0D
_SHOWN_LINE_LENGTH = 60


def shown_line(line: str) -> str:
    """:returns: ``line`` as an error message shows it: quoted, and cut if long."""
    if len(line) > _SHOWN_LINE_LENGTH:
        line = line[:_SHOWN_LINE_LENGTH] + "..."
    return repr(line)


def no_colon(text: str) -> MalformedFrame:
    """:param text: a header section, command line first, with a header line that has no colon."""
    line = next(line for line in text.split("\n")[1:] if ":" not in line)
    return MalformedFrame(
        f"header line without a colon: {shown_line(line)}",
        "STOMP 1.2, Augmented BNF: every header line is name:value.",
    )


def unknown_command(command: str, headers: Headers = ()) -> UnknownCommand:
    """:param command: a command line, decoded, that names no STOMP command."""
    return UnknownCommand(
        "unknown command", f"{command[:40]!r} is not a STOMP command", receipt_of(headers)
    )


def content_length_error(message: str, headers: Headers) -> MalformedFrame:
    """:param message: what is wrong with the ``content-length`` or the body it announces."""
    return MalformedFrame(
        message,
        "STOMP 1.2, Header content-length: the value is a non-negative decimal number"
        " of octets, and exactly that many body octets are followed by a NUL.",
        receipt_of(headers),
    )


def not_utf8(error: UnicodeDecodeError) -> MalformedFrame:
    """:param error: what decoding the command and headers raised."""
    return MalformedFrame(
        "header section is not valid UTF-8",
        f"The command and headers must be UTF-8 (STOMP 1.2, Value Encoding): {error}.",
    )


def frame_too_large(max_frame_size: int, headers: Headers = ()) -> FrameTooLarge:
    """:param headers: the frame's headers, when known, for the ERROR's ``receipt-id``."""
    return FrameTooLarge(
        f"frame too large: more than {max_frame_size} bytes",
        f"The frame (headers and body) is larger than {max_frame_size} bytes.",
        receipt_of(headers),
    )


def too_many_headers(max_headers: int) -> TooManyHeaders:
    return TooManyHeaders(
        f"too many headers: more than {max_headers}",
        f"A frame may have at most {max_headers} headers.",
    )


def check_partial_header(
    source: bytes | bytearray,
    scan: int,
    end: int,
    line_start: int,
    line_count: int,
    max_header_length: int,
    max_headers: int,
) -> tuple[int, int]:
    """
    Check the lines of a header section that is not complete yet, from
    ``scan`` (where the last check stopped) to ``end``, so that a peer
    streaming an endless line, or endless headers, is refused as soon as it
    breaks a limit rather than when its frame is complete.

    :param line_start: where the last, incomplete, line starts.
    :param line_count: how many lines are complete.
    :returns: the new ``line_start`` and ``line_count``.
    :raises HeaderTooLong, TooManyHeaders, UnknownCommand, MalformedFrame: as
        :func:`check_line_length` and :func:`_check_line` say, or for more than
        ``max_headers`` header lines.
    """
    newline = source.find(b"\n", scan, end)
    while newline >= 0:
        check_line_length(source, line_start, newline, max_header_length)
        _check_line(bytes(source[line_start:newline]), line_count)
        line_count += 1
        if line_count - 1 > max_headers:
            raise too_many_headers(max_headers)
        line_start = newline + 1
        newline = source.find(b"\n", line_start, end)
    # The incomplete line may end with the CR of its CRLF: check it as a line.
    check_line_length(source, line_start, end, max_header_length)
    return line_start, line_count


def _check_line(line: bytes, number: int) -> None:
    """
    Judge one complete line of a header section that is not complete yet.

    :param line: the line, without its LF (a CR before it is dropped here).
    :param number: 0 for the command line, then 1, 2... for header lines.
    :raises UnknownCommand: for a command line that names no STOMP command.
    :raises MalformedFrame: for a header line without a colon, or not UTF-8.
    """
    if line[-1:] == b"\r":
        line = line[:-1]
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError as error:
        raise not_utf8(error) from None
    if number == 0:
        if text not in COMMANDS:
            raise unknown_command(text)
    elif ":" not in text:
        raise no_colon("\n" + text)


def check_line_length(
    source: bytes | bytearray, start: int, stop: int, max_header_length: int
) -> None:
    """
    :raises HeaderTooLong: if ``source[start:stop]``, without a final CR, is
        longer than ``max_header_length``.
    """
    length = stop - start
    if length > max_header_length and (length > max_header_length + 1 or source[stop - 1] != _CR):
        raise HeaderTooLong(
            f"header line too long: more than {max_header_length} bytes",
            f"A line of the header section has more than {max_header_length} bytes.",
        )


def check_header_section_size(
    source: bytes | bytearray,
    start: int,
    last_eol: int,
    body_start: int,
    max_frame_size: int,
    max_header_length: int,
) -> None:
    """
    Check a complete header section that is large enough to break a limit;
    ``source[start:last_eol]`` is the command line and the header lines,
    without the last EOL.

    :raises FrameTooLarge: if the section alone is larger than ``max_frame_size``.
    :raises HeaderTooLong: as :func:`check_line_length`.
    """
    if body_start - start > max_frame_size:
        raise frame_too_large(max_frame_size)
    for line in source[start:last_eol].split(b"\n"):
        check_line_length(line, 0, len(line), max_header_length)
