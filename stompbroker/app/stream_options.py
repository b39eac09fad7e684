"""
The options of streams (``/stream/NAME``): ``--stream-max-age`` and
``--stream-max-bytes``, each stream's retention.

:class:`StreamOptions` is a mixin of :class:`stompbroker.app.options.Options`
(twistd gathers ``optParameters`` along the class hierarchy); it parses and
checks, and :func:`stompbroker.app.tap.makeService` hands the
:class:`~stompbroker.broker.streams.offsets.StreamLimits` to the engine.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from twisted.python import usage

from stompbroker.broker.streams.offsets import StreamLimits

__all__ = ["StreamOptions", "parse_age"]

#: RabbitMQ's ``x-max-age`` units, in seconds.
_AGE_UNITS = {"s": 1, "m": 60, "h": 3600, "D": 86400, "M": 30 * 86400, "Y": 365 * 86400}


def parse_age(text: str) -> float:
    """
    :param text: seconds, or a number with one of RabbitMQ's units ``s``, ``m``,
        ``h``, ``D``, ``M`` (30 days) or ``Y`` (365 days), e.g. ``7D``; ``0`` for
        no limit.
    :returns: seconds.
    :raises usage.UsageError: for anything else.
    """
    cleaned = text.strip()
    unit = cleaned[-1:] if cleaned[-1:] in _AGE_UNITS else "s"
    number = cleaned[:-1] if cleaned[-1:] in _AGE_UNITS else cleaned
    try:
        value = float(number) * _AGE_UNITS[unit]
    except ValueError:
        value = -1.0
    if not 0 <= value < float("inf"):
        raise usage.UsageError(
            f"--stream-max-age takes seconds or a number with s, m, h, D, M or Y (as 7D),"
            f" got {text!r}"
        )
    return value


class StreamOptions(usage.Options):
    """``--stream-max-age`` and ``--stream-max-bytes``; ``stream-limits`` holds the result."""

    optParameters: list[Any] = [
        [
            "stream-max-age",
            None,
            "7D",
            "How long each /stream/ keeps a message: seconds, or with a unit s, m, h, D, M, "
            "Y (RabbitMQ's x-max-age); 0 = no limit. Retention drops whole segments (an "
            "eighth of the limit each).",
        ],
        [
            "stream-max-bytes",
            None,
            "256M",
            "Most bytes (bodies and headers) each /stream/ keeps, with an optional unit K, "
            "M, G, T; the oldest segments go first (RabbitMQ's x-max-length-bytes).",
        ],
    ]

    def check_streams(self, parse_size: Callable[[str, str], int]) -> None:
        """
        Read the options into ``stream-limits``.

        :param parse_size: reads a size option (the options' own).
        :raises usage.UsageError: with what is wrong.
        """
        max_age = parse_age(str(self["stream-max-age"]))
        max_bytes = parse_size(str(self["stream-max-bytes"]), "stream-max-bytes")
        if max_bytes < 1:
            raise usage.UsageError("--stream-max-bytes must be at least 1 byte")
        self["stream-limits"] = StreamLimits(max_age=max_age, max_bytes=max_bytes)
