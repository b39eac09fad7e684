"""
The server's WebSocket data frames: one unfragmented, unmasked frame per
message (RFC 6455 section 5.2), which the adapter
(:mod:`stompbroker.transport.websocket`) writes itself rather than through
Autobahn's ``sendMessage``.
"""

from __future__ import annotations

import struct

__all__ = ["OPCODE_BINARY", "OPCODE_TEXT", "server_frame"]

OPCODE_TEXT = 0x1
OPCODE_BINARY = 0x2
_FIN = 0x80
#: The two header bytes of every short unfragmented server frame, by opcode and length.
_SHORT_HEADERS = {
    opcode: [bytes((_FIN | opcode, length)) for length in range(126)]
    for opcode in (OPCODE_TEXT, OPCODE_BINARY)
}
_pack_medium_header = struct.Struct("!BBH").pack
_pack_long_header = struct.Struct("!BBQ").pack


def server_frame(payload: bytes, opcode: int) -> bytes:
    """
    One unfragmented, unmasked server-to-client data frame (RFC 6455 section 5.2).

    The adapter frames its messages itself rather than through Autobahn's
    ``sendMessage``, which costs ten times as much per message (it formats
    a debug log line on every call, logged or not).  Autobahn still does
    everything else: the handshake, reading, control frames and closing.  This
    is safe because the only extension a connection may negotiate,
    permessage-deflate, is framed by :mod:`stompbroker.transport.ws_compression`
    in its place, and because Autobahn only queues its own writes when asked
    to chop or sync them, which nothing here does, so order is kept.

    :param payload: the message.
    :param opcode: :data:`OPCODE_TEXT` or :data:`OPCODE_BINARY`.
    :returns: the frame's bytes.
    """
    length = len(payload)
    if length < 126:
        return _SHORT_HEADERS[opcode][length] + payload
    if length < 0x10000:
        return _pack_medium_header(_FIN | opcode, 126, length) + payload
    return _pack_long_header(_FIN | opcode, 127, length) + payload
