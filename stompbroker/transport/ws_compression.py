"""
permessage-deflate (RFC 7692) on the WebSocket transport: what the server accepts
of a client's offer, and how it compresses the messages it frames itself.

Autobahn negotiates the extension and decompresses what clients send; its
``PerMessageDeflateOfferAccept`` says what the server agrees to, and its
``PerMessageDeflate`` holds the zlib streams.  The adapter frames its own
messages (:func:`stompbroker.transport.ws_frames.server_frame`, for speed), so
a connection that agreed to compress swaps its ``write`` for
:meth:`Deflater.frame`, which compresses through Autobahn's object and sets the
frame's RSV1 bit; a connection without compression keeps the plain ``write``
and pays nothing for this.

Memory: a connection that compresses keeps a zlib compressor of about
``2 ** (window_bits + 2) + 2 ** (mem_level + 9)`` bytes and a decompressor of
``2 ** window_bits`` (the client is asked to use at most ``window_bits`` when
its offer allows it), for its whole life, since the zlib context carries over
from message to message (what makes small JSON messages compress well).
Messages shorter than ``min_size`` go uncompressed (RFC 7692 section 6 lets a
sender choose per message), as do heart-beats.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from attrs import field, frozen
from attrs.validators import in_, instance_of
from autobahn.websocket.compress import PerMessageDeflateOffer, PerMessageDeflateOfferAccept

__all__ = ["Compression", "Deflater"]

#: RFC 7692 section 7.1.2: the window sizes a server may use or ask for.
WINDOW_BITS = range(9, 16)
#: zlib's memory levels.
MEM_LEVELS = range(1, 10)

_FIN_RSV1 = 0x80 | 0x40


@frozen
class Compression:
    """
    When and how the WebSocket transport compresses.

    :ivar enabled: accept a client's permessage-deflate offer; off by default.
    :ivar min_size: messages shorter than this many bytes go uncompressed.
    :ivar window_bits: the server's window (9-15), and the most the client is
        asked to use when its offer lets the server ask.
    :ivar mem_level: zlib's memory level of the server's compressor (1-9).
    """

    enabled: bool = False
    min_size: int = field(default=256, validator=instance_of(int))
    window_bits: int = field(default=12, validator=in_(WINDOW_BITS))
    mem_level: int = field(default=5, validator=in_(MEM_LEVELS))

    @min_size.validator
    def _check_min_size(self, attribute: Any, value: int) -> None:
        if value < 0:
            raise ValueError("the minimum size to compress must be 0 bytes or more")

    def accept(
        self, offers: Sequence[Any], max_message_size: int
    ) -> PerMessageDeflateOfferAccept | None:
        """
        Autobahn's ``perMessageCompressionAccept``: agree to the client's first
        permessage-deflate offer, within this configuration.

        :param offers: the client's offers, in its order of preference.
        :param max_message_size: the largest message decompressed, in bytes;
            more fails the connection (a small message must not inflate without end).
        :returns: the acceptance, or ``None`` to decline (compression off, or
            no deflate offer).
        """
        if not self.enabled:
            return None
        for offer in offers:
            if not isinstance(offer, PerMessageDeflateOffer):
                continue
            window_bits = self.window_bits
            if offer.request_max_window_bits:
                window_bits = min(window_bits, offer.request_max_window_bits)
            return PerMessageDeflateOfferAccept(
                offer,
                request_max_window_bits=self.window_bits if offer.accept_max_window_bits else 0,
                window_bits=window_bits,
                mem_level=self.mem_level,
                max_message_size=max_message_size,
            )
        return None


class Deflater:
    """
    Frames one connection's messages, compressing those of ``min_size`` bytes or more.

    :param deflate: Autobahn's ``PerMessageDeflate`` of the connection.
    :param min_size: as :attr:`Compression.min_size`.
    :param frame: frames an uncompressed message (``server_frame``).
    """

    __slots__ = ("_deflate", "_frame", "_min_size")

    def __init__(self, deflate: Any, min_size: int, frame: Callable[[bytes, int], bytes]) -> None:
        self._deflate = deflate
        self._min_size = min_size
        self._frame = frame

    def frame(self, payload: bytes, opcode: int) -> bytes:
        """
        :returns: one unfragmented server frame of ``payload``, compressed (RSV1
            set) if it is ``min_size`` bytes or more.
        """
        if len(payload) < self._min_size:
            return self._frame(payload, opcode)
        deflate = self._deflate
        deflate.start_compress_message()
        compressed: bytes = deflate.compress_message_data(payload) + deflate.end_compress_message()
        length = len(compressed)
        first = _FIN_RSV1 | opcode
        if length < 126:
            return bytes((first, length)) + compressed
        if length < 0x10000:
            return bytes((first, 126)) + length.to_bytes(2, "big") + compressed
        return bytes((first, 127)) + length.to_bytes(8, "big") + compressed
