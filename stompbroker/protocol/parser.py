"""
The incremental STOMP frame parser: bytes in, :class:`~stompbroker.protocol.frames.Frame` out.

Theory of operation
-------------------
A STOMP stream is a sequence of frames, each optionally preceded by end-of-line
heart-beats (STOMP 1.2, "Heart-beating")::

    command EOL (header-name ":" header-value EOL)* EOL body NUL

where EOL is LF or CRLF (STOMP 1.2, "Augmented BNF").  The body is exactly
``content-length`` bytes when that header is present, and runs to the first NUL
otherwise (STOMP 1.2, "Header content-length").

:class:`FrameParser` is fed whatever the transport read, in any chunking.  It is
on the hot path of every message, so it works the way h11's receive buffer does:

* all searching is done by C code (``bytes.find`` and precompiled regular
  expressions) over the whole buffer, never by a Python loop per byte or per
  header line: one ``findall`` splits every header line of a frame;
* the offset where a search gave up is remembered, so that a large frame fed one
  byte at a time is scanned once, not once per byte (parsing stays O(n));
* consumed bytes are dropped once per :meth:`FrameParser.receive_data` call, not
  once per frame, and when nothing was left over from the previous call the
  incoming ``bytes`` object is parsed in place, without being copied at all;
* each limit is checked as soon as it can be: a peer that streams megabytes
  without a NUL, or announces a body that cannot fit, is refused without the
  parser holding more than ``max_frame_size`` bytes;
* a frame that cannot be STOMP is refused as soon as the line that shows it is
  complete, not when the frame would be: a command line that names no STOMP
  command (of either direction), a header line without a colon or not UTF-8.
  (Random bytes rarely hold the empty line that ends a header section, so a
  peer sending garbage would otherwise get no answer until the frame timeout.)
  Line by line, this runs only for a frame whose header section is incomplete
  when a call ends, on the lines not checked yet; a whole header section is
  judged as before, plus one lookup of its command, so that the outcome never
  depends on how the stream was cut.

A SEND read with LF line ends and no backslash also keeps its header lines as
bytes, unsplit (:attr:`~stompbroker.protocol.frames.Frame.raw`): one slice, so
that a message can be held and forwarded in the form it came in.

In a STOMP 1.0 session, header names and values are read with the blanks
around them trimmed (``destination: /queue/a``), as RabbitMQ and ActiveMQ read
them; 1.1 and 1.2 keep every byte, as they must.

Header escaping (STOMP 1.2, "Value Encoding") depends on the negotiated version,
which the session sets in :attr:`FrameParser.version`; CONNECT, STOMP and
CONNECTED frames are never unescaped.  The decoding itself, and the two headers
the parser reads for itself, are in :mod:`stompbroker.protocol.header_decoding`;
the checks of limits and of incomplete header sections, and the errors the
parser raises, in :mod:`stompbroker.protocol.header_checks`.
"""

from __future__ import annotations

import re

from stompbroker.protocol.errors import ProtocolError
from stompbroker.protocol.frames import SUPPORTED_VERSIONS, UNESCAPED_COMMANDS, Frame, Headers
from stompbroker.protocol.header_checks import (
    COMMANDS,
    check_header_section_size,
    check_partial_header,
    content_length_error,
    frame_too_large,
    no_colon,
    not_utf8,
    shown_line,
    too_many_headers,
    unknown_command,
)
from stompbroker.protocol.header_decoding import PADDED, negotiated_version, trimmed, unescape

__all__ = ["FrameParser"]

#: The end of a header section: the EOL ending the last line, then an empty line.
_HEADER_SECTION_END = re.compile(rb"\n\r?\n")
#: A header line, from the LF before it, split at its first colon (as
#: ``str.partition`` would) into name and value.
_HEADER_LINE = re.compile(r"\n([^:\n]*):([^\n]*)")
#: Heart-beats: any number of EOLs between frames.
_EOLS = re.compile(rb"(?:\r?\n)+")

#: What the parser is waiting for.
_IDLE = 0  # the first byte of a frame; EOLs here are heart-beats
_HEADERS = 1  # the empty line that ends the header section
_BODY_LENGTH = 2  # content-length body bytes and their NUL
_BODY_NUL = 3  # the NUL that ends a body without content-length

_CR = 0x0D
#: Bodies longer than this are copied out of the buffer through a memoryview,
#: which costs one copy instead of two but more than a slice for small ones.
_COPY_THROUGH_VIEW = 64 * 1024

# Frame(command, headers, body) runs attrs' frozen __init__, a Python-level call
# that sets each field through object.__setattr__; setting the slots of a bare
# instance makes the same, equal, frame in about half the time.  This is right
# while Frame's fields are exactly these three, none validated or converted
# (test_parser.py checks that).
_new_frame = object.__new__
_set_command = vars(Frame)["command"].__set__
_set_headers = vars(Frame)["headers"].__set__
_set_body = vars(Frame)["body"].__set__
_set_raw = vars(Frame)["raw"].__set__


class FrameParser:
    """
    Turns a STOMP byte stream, chunked in any way, into frames.

    Limits are counted in bytes.  The size of a frame is that of its header
    section (command line, header lines and the empty line, EOLs included) plus
    its body; the terminating NUL and heart-beat EOLs before the frame do not
    count.

    :param max_frame_size: the largest frame accepted.
    :param max_headers: the most header lines a frame may have.
    :param max_header_length: the longest line, command line included and EOL
        excluded, that a header section may have.

    :ivar version: the negotiated STOMP version, ``"1.0"``, ``"1.1"`` or
        ``"1.2"`` (the default); it decides header unescaping.  The session sets
        it after negotiation.  The parser also adopts on its own the version that
        a CONNECT or STOMP frame's ``accept-version`` (or a CONNECTED frame's
        ``version``) points to, so that frames pipelined behind the CONNECT, in
        the same chunk, are unescaped right although the session has not seen
        the CONNECT yet.
    """

    __slots__ = (
        "max_frame_size",
        "max_headers",
        "max_header_length",
        "_version",
        "_unescaping",
        "_buffer",
        "_error",
        "_state",
        "_scan",
        "_line_start",
        "_line_count",
        "_body_start",
        "_content_length",
        "_command",
        "_headers",
        "_raw",
    )

    def __init__(
        self,
        max_frame_size: int = 100 * 1024 * 1024,
        max_headers: int = 1000,
        max_header_length: int = 10240,
    ) -> None:
        self.max_frame_size = max_frame_size
        self.max_headers = max_headers
        self.max_header_length = max_header_length
        self._version = "1.2"
        self._unescaping = True
        # Unconsumed input; when parsing stops inside a frame, that frame starts
        # at offset 0 and every offset below is relative to it.
        self._buffer = bytearray()
        self._error: ProtocolError | None = None
        self._state = _IDLE
        # _HEADERS: where the search for the end of the header section gave up,
        # where the current (incomplete) line starts, and how many lines are complete.
        # _BODY_NUL: where the search for the NUL gave up.
        self._scan = 0
        self._line_start = 0
        self._line_count = 0
        # _BODY_LENGTH and _BODY_NUL: the frame parsed so far.
        self._body_start = 0
        self._content_length = 0
        self._command = ""
        self._headers: Headers = ()
        self._raw: bytes | bytearray | None = None

    @property
    def version(self) -> str:
        """The STOMP version whose escaping rules apply to the next frame."""
        return self._version

    @version.setter
    def version(self, version: str) -> None:
        if version not in SUPPORTED_VERSIONS:
            raise ValueError(f"unsupported STOMP version {version!r}")
        self._version = version
        self._unescaping = version != "1.0"

    @property
    def error(self) -> ProtocolError | None:
        """The fault that killed the parser, or ``None`` while it is alive."""
        return self._error

    def receive_data(self, data: bytes) -> list[Frame]:
        """
        Parse more of the stream.

        ``data`` may hold any part of the stream: a byte, a frame split anywhere
        (inside a CRLF too), many frames.  Bytes of an incomplete frame are kept
        until the rest arrives.

        After a :class:`ProtocolError` the parser is dead: the stream can no
        longer be resynchronised, so the caller must send an ERROR frame and
        close the connection; any further call raises the same error again.
        When ``data`` completes frames before the fault, those frames are
        returned and the fault is left in :attr:`error` (the caller acts on
        the frames, then on the fault), so what a client sent correctly never
        depends on how the network cut its bytes.

        :param data: the bytes just read (any bytes-like object is copied to ``bytes``).
        :returns: the frames completed by ``data``, in stream order (possibly none).
        :raises FrameTooLarge: a frame is larger than ``max_frame_size``.
        :raises TooManyHeaders: a frame has more than ``max_headers`` headers.
        :raises HeaderTooLong: a header section line is longer than ``max_header_length``.
        :raises MalformedFrame: a header line without a colon, an undefined escape,
            a bad ``content-length``, a missing NUL after a ``content-length``
            body, or a header section that is not UTF-8.
        """
        if self._error is not None:
            raise self._error
        if type(data) is not bytes:
            data = bytes(data)  # a bytearray or memoryview the caller may reuse
        buffer = self._buffer
        source: bytes | bytearray
        if not buffer:
            source = data
        elif len(buffer) < len(data):
            # Joining copies the short leftover once; the result is immutable
            # bytes, whose slices are the frames' bodies without another copy.
            source = b"".join((buffer, data))
        else:
            # A large frame arriving in small pieces: append in place, so that
            # one-byte-at-a-time feeding stays O(n).
            buffer += data
            source = buffer
        frames: list[Frame] = []
        try:
            consumed = self._parse(source, frames)
        except ProtocolError as error:
            self._error = error
            self._buffer = bytearray()
            if not frames:
                raise
            # Frames completed before the fault are the client's accepted work:
            # hand them over; the caller finds the fault in ``error`` and the
            # next call raises it.
            return frames
        if source is buffer:
            del buffer[:consumed]
        elif consumed < len(source):
            buffer.clear()
            buffer += memoryview(source)[consumed:]
        elif buffer:
            buffer.clear()
        return frames

    def _parse(self, source: bytes | bytearray, frames: list[Frame]) -> int:
        """
        Parse the frames in ``source``, which starts at the current frame (or
        between frames), and save the state reached.

        The common case, a whole frame with LF line ends, runs straight through
        this one function with everything it needs in local variables; the
        unusual (CRLF, escapes, limits nearly hit, errors) is left to helpers.

        :param frames: the list the completed frames are appended to, which keeps
            them for the caller when a later frame in ``source`` is at fault.
        :returns: how many bytes of ``source`` the completed frames consumed.
        """
        append = frames.append
        end = len(source)
        copy_bodies = type(source) is not bytes
        max_frame_size = self.max_frame_size
        max_header_length = self.max_header_length
        max_headers = self.max_headers
        state = self._state
        position = 0  # the start of the current frame, or the first unconsumed byte
        scan = self._scan
        line_start = self._line_start
        line_count = self._line_count
        body_start = self._body_start
        content_length = self._content_length
        command = self._command
        headers = self._headers
        raw: bytes | bytearray | None = self._raw
        # The header section's separator is at most three bytes long: resume the
        # search for it two bytes before where the last one gave up.
        search_from = scan - 2 if scan > 2 else 0
        next_cr = -1
        crlf_line_ends = False
        unescaping = self._unescaping  # False in 1.0; a CONNECT may change it
        while True:
            if state == _IDLE:
                if position == end:
                    break
                if source[position] in b"\r\n":
                    match = _EOLS.match(source, position)
                    if match is not None:
                        position = match.end()
                    if position == end:
                        break
                    if position + 1 == end and source[position] == _CR:
                        break  # perhaps the first half of a CRLF heart-beat
                state = _HEADERS
                search_from = scan = line_start = position
                line_count = 0

            if state == _HEADERS:
                # An LF header section ends at the first "\n\n" when no CR comes
                # before it (only a CR can put a "\n\r\n" first), and bytes.find
                # finds that sooner than the regex, which decides everything else:
                # CRLF, a stray CR, an incomplete section.  next_cr, the first CR
                # at or after search_from (or end), is kept while it lies ahead, so
                # a stream without CR is searched for one once per call; once a
                # section ends with CRLF, the next ones most likely do too.
                last_eol = -1
                if not crlf_line_ends:
                    if next_cr < search_from:
                        next_cr = source.find(b"\r", search_from)
                        if next_cr < 0:
                            next_cr = end
                    last_eol = source.find(b"\n\n", search_from, next_cr)
                if last_eol >= 0:
                    body_start = last_eol + 2
                else:
                    match = _HEADER_SECTION_END.search(source, search_from)
                    if match is None:
                        if end - position > max_frame_size:
                            raise frame_too_large(max_frame_size)
                        line_start, line_count = check_partial_header(
                            source,
                            scan,
                            end,
                            line_start,
                            line_count,
                            max_header_length,
                            max_headers,
                        )
                        scan = end
                        break
                    last_eol, body_start = match.span()
                    crlf_line_ends = body_start - last_eol == 3
                if (
                    body_start - position > max_frame_size
                    or last_eol - position > max_header_length
                ):
                    check_header_section_size(
                        source, position, last_eol, body_start, max_frame_size, max_header_length
                    )
                try:
                    text = source[position:last_eol].decode("utf-8")
                except UnicodeDecodeError as error:
                    raise not_utf8(error) from None
                crlf = "\r" in text
                if crlf:
                    # CRLF line ends: drop each CR that ends a line (the last line's
                    # LF is not part of the text).
                    text = text.replace("\r\n", "\n")
                    if text[-1] == "\r":
                        text = text[:-1]
                header_count = text.count("\n")
                if header_count > max_headers:
                    raise too_many_headers(max_headers)
                # One C-level pass pairs every header line's name and value; a
                # line without a colon yields no pair, so it shows in the count.
                pairs = _HEADER_LINE.findall(text)
                if len(pairs) != header_count:
                    raise no_colon(text)
                headers = tuple(pairs)
                command = text.partition("\n")[0]
                escaped = "\\" in text
                if command == "SEND" and not crlf and not escaped:
                    # The lines as they came, for the session (see Frame.raw).
                    raw = source[position + 5 : last_eol]
                    if copy_bodies:
                        raw = bytes(raw)
                else:
                    raw = None
                if command in UNESCAPED_COMMANDS:
                    self._adopt_version(command, headers)
                    unescaping = self._unescaping
                elif command not in COMMANDS:
                    # The second lookup of the same str reuses its cached hash.
                    raise unknown_command(command, headers)
                elif escaped and unescaping:
                    headers = tuple([(unescape(name), unescape(value)) for name, value in headers])
                if not unescaping and PADDED.search(text) is not None:
                    # STOMP 1.0, a name or value with blanks around it: read
                    # trimmed (see header_decoding.trimmed), content-length too.
                    headers = trimmed(headers)
                    raw = None
                    text = "\n".join([command, *[f"{name}:{value}" for name, value in headers]])
                # No escape yields a digit or a character of "content-length", so
                # the raw text tells the first content-length header and its value.
                content_length = text.find("\ncontent-length:")
                if content_length < 0:
                    state = _BODY_NUL
                    scan = body_start
                else:
                    content_length += 16
                    value_end = text.find("\n", content_length)
                    if value_end < 0:
                        value_end = len(text)
                    value = text[content_length:value_end]
                    if not (value.isdigit() and value.isascii()):
                        raise content_length_error(
                            f"invalid content-length: {shown_line(value)}", headers
                        )
                    content_length = int(value)
                    if body_start - position + content_length > max_frame_size:
                        raise frame_too_large(max_frame_size, headers)
                    state = _BODY_LENGTH

            if state == _BODY_LENGTH:
                terminator = body_start + content_length
                if terminator >= end:
                    break
                if source[terminator]:
                    raise content_length_error(
                        "frame body is not terminated by NUL after content-length"
                        f" {content_length}",
                        headers,
                    )
            else:
                # The NUL may not lie beyond max_frame_size: bounding the search
                # also keeps it from reading other frames' bytes for nothing.
                terminator = source.find(b"\0", scan, position + max_frame_size + 1)
                if terminator < 0:
                    if end - position > max_frame_size:
                        raise frame_too_large(max_frame_size, headers)
                    scan = end
                    break
            frame = _new_frame(Frame)
            _set_command(frame, command)
            _set_headers(frame, headers)
            _set_raw(frame, raw)
            if copy_bodies:
                if terminator - body_start > _COPY_THROUGH_VIEW:
                    # A bytearray's slice is a copy: through a view, a large
                    # body (megabytes gathered over many reads) is copied once.
                    _set_body(frame, bytes(memoryview(source)[body_start:terminator]))
                else:
                    _set_body(frame, bytes(source[body_start:terminator]))
            else:  # source is bytes: its slice is the body, copied once
                _set_body(frame, source[body_start:terminator])
            append(frame)
            position = terminator + 1
            state = _IDLE

        self._state = state
        if state == _HEADERS:
            self._scan = scan - position
            self._line_start = line_start - position
            self._line_count = line_count
        elif state != _IDLE:
            self._scan = scan - position
            self._body_start = body_start - position
            self._content_length = content_length
            self._command = command
            self._headers = headers
            self._raw = raw
        return position

    def use(self, version: str) -> None:
        """Parse by ``version``'s rules from now on (a session's CONNECT negotiated it)."""
        self.version = version

    def in_frame(self) -> bool:
        """:returns: whether bytes of an incomplete frame are waiting for the rest."""
        return bool(self._buffer)

    def _adopt_version(self, command: str, headers: Headers) -> None:
        """Switch to the version a CONNECT, STOMP or CONNECTED frame points to."""
        version = negotiated_version(command, headers)
        if version is not None:
            self.version = version

    def __repr__(self) -> str:
        return (
            f"<FrameParser version={self._version!r} buffered={len(self._buffer)}"
            f" dead={self._error is not None}>"
        )
