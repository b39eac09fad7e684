"""
Frames to bytes: the exact inverse of :class:`~stompbroker.protocol.parser.FrameParser`.

Two paths:

* :func:`encode` turns any :class:`~stompbroker.protocol.frames.Frame` into
  bytes (CONNECTED, RECEIPT, ERROR, and the frames tests and clients send);
* :func:`message_prefix` and :func:`message_tail` build MESSAGE frames on the
  delivery path.  A published message goes to many subscribers whose frames
  differ only in the ``subscription`` header (and perhaps ``ack``), so the rest,
  the tail, is encoded once per message and escaping style and cached in
  ``Message.wire``; each delivery then costs one short prefix.

Escaping (STOMP 1.2, "Value Encoding"): 1.0 has none, so a header that cannot
be written raw is refused with :class:`ValueError`; 1.1 and 1.2 escape
backslash, CR, LF and colon.  (1.1 defines no ``\\r``; we send it anyway, as our
parser and every 1.2-era client accept it, so that a CR survives the round
trip.)  CONNECT, STOMP and CONNECTED are never escaped, in any version.

Before CONNECTED the client does not know the version, so a frame sent then (an
ERROR: a refused login, a first frame that is no CONNECT) is not escaped either
(:func:`encode_unnegotiated`): a client that has not read CONNECTED has no
reason to undo 1.2's escapes, and stompjs does not (it would show
``login failed\\c bad password``).  Line breaks in its values become spaces,
as 1.0 has no way to send them.

Every frame ends with NUL and one LF (:data:`FRAME_END`), as RabbitMQ's and
ActiveMQ's do.  The specification lets a frame end at its NUL, and lets EOLs
follow it (a peer reads them as heart-beats), but some clients count on the LF:
PHP's PECL extension, reading several frames from one read, drops the byte
after each NUL, which would otherwise be the next frame's first.  The LF is
part of the cached tails, so it costs no extra write or join.
"""

from __future__ import annotations

from collections.abc import Callable

from stompbroker.protocol.frames import SUPPORTED_VERSIONS, UNESCAPED_COMMANDS, Frame, Headers
from stompbroker.protocol.header_decoding import unescape
from stompbroker.protocol.message import NO_TAILS, Message

__all__ = [
    "FRAME_END",
    "encode",
    "encode_unnegotiated",
    "error_frame",
    "escape",
    "message_prefix",
    "message_tail",
    "unescape",
]

#: What ends every frame the broker writes: the NUL, and the LF some clients need (see above).
FRAME_END = b"\0\n"


def _escaped(text: str) -> str:
    # Four substring tests are the cheapest way to learn that most text needs
    # nothing; backslashes are escaped first, so that those added next stay single.
    if "\\" in text or "\r" in text or "\n" in text or ":" in text:
        return (
            text.replace("\\", "\\\\").replace("\r", "\\r").replace("\n", "\\n").replace(":", "\\c")
        )
    return text


def _raw_value(text: str) -> str:
    if "\n" in text or "\r" in text:
        raise ValueError(f"header value {text!r} holds CR or LF and cannot be sent unescaped")
    return text


def _raw_name(text: str) -> str:
    if ":" in text or "\n" in text or "\r" in text:
        raise ValueError(
            f"header name {text!r} holds a colon, CR or LF and cannot be sent unescaped"
        )
    return text


def _representable_raw(name: str, value: str) -> bool:
    return not (":" in name or "\n" in name or "\r" in name or "\n" in value or "\r" in value)


def _flattened(text: str) -> str:
    if "\n" in text or "\r" in text:
        return text.replace("\r", " ").replace("\n", " ")
    return text


_Escaper = Callable[[str], str]

#: For each version: the ``Message.wire`` keys its tail is cached under, and
#: the functions that put a header name and a header value on the wire.  1.1
#: and 1.2 escape alike, so one encoding of a tail serves both keys.
_ESCAPING: dict[str, tuple[tuple[str, ...], _Escaper, _Escaper]] = {
    "1.0": (("1.0",), _raw_name, _raw_value),
    "1.1": (("1.1", "1.2"), _escaped, _escaped),
    "1.2": (("1.2", "1.1"), _escaped, _escaped),
}
_RAW = _ESCAPING["1.0"]


def _escaping(version: str) -> tuple[tuple[str, ...], _Escaper, _Escaper]:
    try:
        return _ESCAPING[version]
    except KeyError:
        raise ValueError(
            f"unsupported STOMP version {version!r}; expected one of {SUPPORTED_VERSIONS}"
        ) from None


def escape(text: str, version: str = "1.2") -> str:
    """
    Put a header name or value into its wire form (STOMP 1.2, "Value Encoding").

    :param text: the name or value.
    :param version: the negotiated protocol version.
    :returns: ``text`` with backslash, CR, LF and colon escaped (1.1, 1.2), or
        unchanged (1.0).
    :raises ValueError: in 1.0, if ``text`` holds CR or LF (a 1.0 header *name*
        may not hold a colon either; :func:`encode` checks that); or for an
        unknown version.
    """
    return _escaping(version)[2](text)


def _header_lines(headers: Headers, escape_name: _Escaper, escape_value: _Escaper) -> list[str]:
    return [f"{escape_name(name)}:{escape_value(value)}" for name, value in headers]


def encode(frame: Frame, version: str = "1.2") -> bytes:
    """
    Serialize a frame: command, LF, ``name:value`` LF per header, LF, body, NUL, LF.

    Headers are written in order, escaped for ``version`` (never for CONNECT,
    STOMP and CONNECTED), and nothing is added: a frame whose body may hold NUL
    must already carry its ``content-length``.

    :param frame: the frame.
    :param version: the protocol version of the connection it goes to.
    :returns: the frame's bytes.
    :raises ValueError: if the frame cannot be written so that it parses back
        the same: an empty command or one with CR or LF; a header that cannot be
        represented unescaped (1.0, CONNECT, STOMP, CONNECTED); a body holding
        NUL without ``content-length``, or a ``content-length`` that is not the
        body's length; or an unknown version.
    """
    escaping = _escaping(version)
    if frame.command in UNESCAPED_COMMANDS:
        escaping = _RAW
    return _encoded(frame, escaping[1], escaping[2])


def encode_unnegotiated(frame: Frame) -> bytes:
    """
    Serialize a frame sent before CONNECTED, when the client knows no version
    yet (see the module notes): headers unescaped, line breaks in values as spaces.

    :param frame: the frame (an ERROR).
    :returns: the frame's bytes.
    :raises ValueError: as :func:`encode` does for 1.0, except for line breaks in values.
    """
    return _encoded(frame, _raw_name, _flattened)


def _encoded(frame: Frame, escape_name: _Escaper, escape_value: _Escaper) -> bytes:
    command = frame.command
    if not command or "\n" in command or "\r" in command:
        raise ValueError(f"invalid command {command!r}")
    lines = _header_lines(frame.headers, escape_name, escape_value)
    body = frame.body
    content_length = frame.get("content-length")
    if content_length is None:
        if b"\0" in body:
            raise ValueError("a body holding NUL needs a content-length header")
    elif not (
        content_length.isascii() and content_length.isdigit() and int(content_length) == len(body)
    ):
        raise ValueError(
            f"content-length {content_length!r} does not match the body's {len(body)} bytes"
        )
    lines.insert(0, command)
    lines.append("\n")
    return "\n".join(lines).encode("utf-8") + body + FRAME_END


def message_tail(message: Message, version: str) -> bytes:
    """
    The bytes of a MESSAGE frame that every subscription shares: everything
    after the ``subscription`` header (and any per-subscription headers).

    That is ``message-id``, ``destination``, the user headers, a
    ``content-length`` of the body, the empty line, the body, the NUL and its LF,
    escaped for ``version``.  The result is cached in ``message.wire[version]``,
    so that every delivery after the first is a dict lookup (callers may look
    there themselves first).  1.1 and 1.2 escape alike, so encoding for one
    fills both keys with the same bytes.

    :param message: the message; its ``headers`` hold no ``content-length``,
        ``destination``, ``message-id`` or ``subscription`` (the caller's promise).
    :param version: the subscriber's protocol version.
    :returns: the tail; a whole frame is ``message_prefix(...) + message_tail(...)``.
    :raises ValueError: for an unknown version.  A message published over 1.1 or
        1.2 may hold headers that STOMP 1.0 cannot carry (CR or LF in a value, a
        colon in a name); delivery must not fail over them, so for 1.0 such a
        header is left out and CR or LF in the destination become spaces.
    """
    tail = message.wire.get(version)
    if tail is None and (version == "1.2" or version == "1.1"):
        tail = _plain_tail(message)
    if tail is None:
        keys, escape_name, escape_value = _escaping(version)
        body = message.body
        headers = message.headers
        if version == "1.0":
            escape_value = _flattened
            headers = tuple(pair for pair in headers if _representable_raw(*pair))
        lines = _header_lines(headers, escape_name, escape_value)
        lines.insert(0, "destination:" + escape_value(message.destination))
        lines.insert(0, "message-id:" + escape_value(message.message_id))
        lines.append(f"content-length:{len(body)}\n\n")
        tail = "\n".join(lines).encode("utf-8") + body + FRAME_END
        wire = message.wire
        if wire is NO_TAILS:
            wire = message.wire = {}
        for key in keys:
            wire[key] = tail
    return tail


def _plain_tail(message: Message) -> bytes | None:
    """
    The 1.1/1.2 tail of a message none of whose header text needs escaping, or
    ``None`` if some does.

    Nearly every message is such, and a queued one is encoded once per
    delivery, so this is on the per-message path: the lines are joined raw,
    then checked at once.  Each ``name:value`` line brings one colon and each
    join one LF, so counts that match those, and no backslash or CR, mean that
    no name or value holds a character to escape.  A message that holds the
    plain lines its SEND came with (see :class:`Message`) needs only its own
    two lines checked, and its header lines copied.
    """
    headers = message._headers  # the stored form: pairs, or plain lines
    text = f"message-id:{message.message_id}\ndestination:{message.destination}"
    body = message.body
    if isinstance(headers, bytes):
        if text.count(":") != 2 or text.count("\n") != 1 or "\\" in text or "\r" in text:
            return None
        tail = b"%b\n%b\ncontent-length:%d\n\n%b\0\n" % (text.encode(), headers, len(body), body)
    else:
        for name, value in headers:
            text += f"\n{name}:{value}"
        lines = len(headers) + 2
        if (
            text.count(":") != lines
            or text.count("\n") != lines - 1
            or "\\" in text
            or "\r" in text
        ):
            return None
        tail = b"%b\ncontent-length:%d\n\n%b\0\n" % (text.encode(), len(body), body)
    wire = message.wire
    if wire is NO_TAILS:
        message.wire = {"1.1": tail, "1.2": tail}
    else:
        wire["1.1"] = wire["1.2"] = tail
    return tail


def message_prefix(subscription_id: str | None, version: str, extra: Headers = ()) -> bytes:
    """
    The per-subscription head of a MESSAGE frame: ``MESSAGE``, ``subscription``,
    then the ``extra`` header pairs (``ack`` in STOMP 1.2, for instance), escaped
    for ``version``.

    :param subscription_id: the subscription's ``id``; ``None`` for a STOMP 1.0
        SUBSCRIBE that gave none, whose MESSAGE frames carry no ``subscription``
        header (as ActiveMQ's: such clients match messages by destination).
    :param version: the subscriber's protocol version.
    :param extra: more ``(name, value)`` headers for this delivery.
    :returns: bytes to which :func:`message_tail` is appended.
    :raises ValueError: in 1.0, if a header cannot be represented unescaped; or
        for an unknown version.
    """
    escape_name, escape_value = _escaping(version)[1:]
    head = "MESSAGE\n"
    if subscription_id is not None:
        head += "subscription:" + escape_value(subscription_id) + "\n"
    for name, value in extra:
        head += escape_name(name) + ":" + escape_value(value) + "\n"
    return head.encode("utf-8")


def error_frame(
    message: str,
    detail: str = "",
    receipt_id: str | None = None,
    extra: Headers = (),
) -> Frame:
    """
    Build an ERROR frame (STOMP 1.2, "ERROR").

    :param message: a short description, sent as the ``message`` header; line
        breaks become spaces, so that it can be sent to a 1.0 client too.
    :param detail: a longer explanation, sent as the ``text/plain`` body.
    :param receipt_id: the ``receipt`` of the frame that caused the error, sent
        as ``receipt-id``.
    :param extra: more ``(name, value)`` headers, appended last.
    :returns: the frame, with ``message``, ``content-type``, ``content-length``,
        ``receipt-id`` if given, then ``extra``.
    """
    body = detail.encode("utf-8")
    one_line = message.replace("\r\n", " ").replace("\r", " ").replace("\n", " ")
    headers: list[tuple[str, str]] = [
        ("message", one_line),
        ("content-type", "text/plain"),
        ("content-length", str(len(body))),
    ]
    if receipt_id is not None:
        headers.append(("receipt-id", receipt_id))
    headers.extend(extra)
    return Frame("ERROR", tuple(headers), body)
