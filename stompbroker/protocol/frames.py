"""
STOMP frames as immutable values, and the protocol's vocabulary.

A frame keeps its headers as an ordered tuple of pairs, exactly as they came off
the wire, because STOMP gives meaning to order: when a header is repeated, the
first occurrence wins (STOMP 1.2, "Repeated Header Entries").
"""

from __future__ import annotations

from attrs import field, frozen

from stompbroker.protocol.errors import MissingHeader

#: Versions we speak, best first.
SUPPORTED_VERSIONS: tuple[str, ...] = ("1.2", "1.1", "1.0")

#: Commands a client may send.
CLIENT_COMMANDS: frozenset[str] = frozenset(
    {
        "CONNECT",
        "STOMP",
        "SEND",
        "SUBSCRIBE",
        "UNSUBSCRIBE",
        "ACK",
        "NACK",
        "BEGIN",
        "COMMIT",
        "ABORT",
        "DISCONNECT",
    }
)

#: Commands a server sends.
SERVER_COMMANDS: frozenset[str] = frozenset({"CONNECTED", "MESSAGE", "RECEIPT", "ERROR"})

#: Frames whose headers are never escaped, in any version (STOMP 1.2, "Value Encoding").
UNESCAPED_COMMANDS: frozenset[str] = frozenset({"CONNECT", "CONNECTED", "STOMP"})

Headers = tuple[tuple[str, str], ...]


@frozen
class Frame:
    """
    One STOMP frame.

    :ivar command: the command line, e.g. ``"SEND"``.
    :ivar headers: ``(name, value)`` pairs in wire order; repeats are kept.
    :ivar body: the body bytes, which may contain NUL when ``content-length`` is given.
    :ivar raw: for a SEND that the parser read with LF line ends and no
        backslash (so nothing to unescape), its header lines as they came
        (``b"destination:/queue/a\\nseq:1"``: no command line, no final EOL),
        so that the session can hand plain
        user headers to the broker without joining them again; ``None``
        otherwise.  Not compared: a frame equals one built from its parts.

    The parser, which makes one frame per message received, fills the four
    slots of a bare instance instead of calling ``__init__``: a field added here,
    or a validator or converter, must be handled there too.
    """

    command: str
    headers: Headers = ()
    body: bytes = field(default=b"")
    raw: bytes | None = field(default=None, eq=False, repr=False)

    def get(self, name: str, default: str | None = None) -> str | None:
        """
        :returns: the first value of header ``name``, or ``default``.
        """
        for key, value in self.headers:
            if key == name:
                return value
        return default

    def required(self, name: str) -> str:
        """
        :returns: the first value of header ``name``, which the frame must have.
        :raises MissingHeader: if it has not.
        """
        value = self.get(name)
        if value is None:
            raise MissingHeader(
                f"missing {name} header",
                f"a {self.command} frame must have a '{name}' header",
            )
        return value

    def header_dict(self) -> dict[str, str]:
        """
        :returns: the headers as a dict in which the first of repeated headers wins.
        """
        result: dict[str, str] = {}
        for key, value in self.headers:
            if key not in result:
                result[key] = value
        return result
