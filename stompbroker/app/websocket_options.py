"""
The options of the WebSocket transport's compression: ``--ws-compression`` and
the ``--ws-compression-...`` settings of permessage-deflate (RFC 7692).

:class:`WebSocketOptions` is a mixin of :class:`stompbroker.app.options.Options`
(twistd gathers ``optParameters`` and ``optFlags`` along the class hierarchy);
it parses and checks, and :func:`stompbroker.app.tap.makeService` hands the
:class:`~stompbroker.transport.ws_compression.Compression` to the WebSocket
endpoint.
"""

from __future__ import annotations

from typing import Any

from twisted.python import usage

from stompbroker.app.option_values import parse_size
from stompbroker.transport.ws_compression import MEM_LEVELS, WINDOW_BITS, Compression

__all__ = ["WebSocketOptions"]

_DEFAULT = Compression()


class WebSocketOptions(usage.Options):
    """The compression options; ``ws-compression-settings`` holds the result."""

    optFlags: list[Any] = [
        [
            "ws-compression",
            None,
            "Accept WebSocket clients' permessage-deflate offers (RFC 7692): messages of "
            "--ws-compression-min-size bytes or more go compressed.",
        ],
    ]

    optParameters: list[Any] = [
        [
            "ws-compression-min-size",
            None,
            str(_DEFAULT.min_size),
            "With --ws-compression, messages shorter than this go uncompressed (bytes, or "
            "with a unit K, M).",
        ],
        [
            "ws-compression-window-bits",
            None,
            _DEFAULT.window_bits,
            "With --ws-compression, the deflate window (9-15): the server's, and the most a "
            "client that allows it is asked to use. Memory per connection grows with it.",
            int,
        ],
        [
            "ws-compression-mem-level",
            None,
            _DEFAULT.mem_level,
            "With --ws-compression, zlib's memory level of each connection's compressor (1-9).",
            int,
        ],
    ]

    def check_websocket(self) -> None:
        """
        Read the options into ``ws-compression-settings``.

        :raises usage.UsageError: with what is wrong.
        """
        bits = self["ws-compression-window-bits"]
        if bits not in WINDOW_BITS:
            raise usage.UsageError(f"--ws-compression-window-bits must be 9 to 15, got {bits}")
        level = self["ws-compression-mem-level"]
        if level not in MEM_LEVELS:
            raise usage.UsageError(f"--ws-compression-mem-level must be 1 to 9, got {level}")
        self["ws-compression-settings"] = Compression(
            enabled=bool(self["ws-compression"]),
            min_size=parse_size(str(self["ws-compression-min-size"]), "ws-compression-min-size"),
            window_bits=bits,
            mem_level=level,
        )
