"""
Reading header values off the wire: escape decoding, and the few headers the frame
parser reads for itself.

Header escaping (STOMP 1.2, "Value Encoding"): 1.0 has none; 1.1 and 1.2 decode
``\\r``, ``\\n``, ``\\c`` and ``\\\\``, and any other backslash sequence is a fatal
protocol error.  The parser (:mod:`stompbroker.protocol.parser`) calls
:func:`unescape` only for a header section that holds a backslash, and reads two
headers before the session sees the frame: the version a CONNECT points to, so
that frames pipelined behind it are unescaped right, and a frame's ``receipt``,
so that the ERROR for a bad frame can carry its ``receipt-id``.

STOMP 1.0 had no grammar for blanks around the colon, and clients of its time
write ``destination: /queue/a`` (Perl's POE::Filter::Stomp, for one).  RabbitMQ
strips the blanks before a 1.0 value (``rabbit_stomp_util:trim_headers``) and
ActiveMQ trims 1.0 names and values at both ends (``StompWireFormat``), so a
1.0 session here reads them as ActiveMQ does: :func:`trimmed`.  1.1 and 1.2
keep every byte (STOMP 1.2: "no trimming of whitespace").
"""

from __future__ import annotations

import re

from stompbroker.protocol.errors import MalformedFrame
from stompbroker.protocol.frames import SUPPORTED_VERSIONS, Headers

__all__ = ["PADDED", "negotiated_version", "receipt_of", "trimmed", "unescape"]

#: One backslash escape, with whatever follows it (nothing, for a trailing backslash).
_ESCAPE_SEQUENCE = re.compile(r"\\(.?)", re.DOTALL)
_UNESCAPES = {"r": "\r", "n": "\n", "c": ":", "\\": "\\"}


def _replace_escape(match: re.Match[str]) -> str:
    replacement = _UNESCAPES.get(match.group(1))
    if replacement is None:
        raise MalformedFrame(
            f"undefined escape sequence {match.group(0)!r} in a header",
            "STOMP 1.2, Value Encoding: a backslash in a header may only be followed by"
            " r, n, c or another backslash; any other escape is a fatal protocol error.",
        )
    return replacement


def unescape(text: str, version: str = "1.2") -> str:
    """
    Decode the escape sequences of a header name or value as read off the wire.

    STOMP 1.0 has no escaping.  1.1 and 1.2 decode ``\\r``, ``\\n``, ``\\c`` and
    ``\\\\``; ``\\r`` is accepted in 1.1 too, leniently (STOMP 1.2, "Value Encoding").

    :param text: the raw name or value.
    :param version: the negotiated protocol version.
    :returns: the decoded text.
    :raises MalformedFrame: on any other backslash sequence, a trailing lone
        backslash included.
    """
    if version == "1.0" or "\\" not in text:
        return text
    return _ESCAPE_SEQUENCE.sub(_replace_escape, text)


#: Blanks that :func:`trimmed` would take off a header section's names or values:
#: beside a colon, or at either end of a line.
PADDED = re.compile(r"[ \t]:|:[ \t]|[ \t]\n|\n[ \t]|[ \t]\Z")
_BLANKS = " \t"


def trimmed(headers: Headers) -> Headers:
    """
    A STOMP 1.0 frame's headers as RabbitMQ and ActiveMQ read them.

    :returns: ``headers`` with spaces and tabs taken off both ends of each name
        and value.
    """
    return tuple([(name.strip(_BLANKS), value.strip(_BLANKS)) for name, value in headers])


def receipt_of(headers: Headers) -> str | None:
    """:returns: the first ``receipt`` header's value, or ``None`` without one."""
    for name, value in headers:
        if name == "receipt":
            return value
    return None


def negotiated_version(command: str, headers: Headers) -> str | None:
    """
    The version a CONNECT, STOMP or CONNECTED frame will most likely settle on.

    :returns: the best supported version offered by ``accept-version`` (CONNECT,
        STOMP) or named by ``version`` (CONNECTED), ``"1.0"`` when the header is
        absent (STOMP 1.2, "Protocol Negotiation"), or ``None`` when nothing
        offered is supported.
    """
    wanted = "version" if command == "CONNECTED" else "accept-version"
    offered = None
    for name, value in headers:
        if name == wanted:
            offered = value
            break
    if offered is None:
        return "1.0"
    accepted = {version.strip() for version in offered.split(",")}
    for version in SUPPORTED_VERSIONS:
        if version in accepted:
            return version
    return None
