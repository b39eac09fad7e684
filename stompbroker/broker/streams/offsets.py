"""
Where a stream subscription starts (the ``x-stream-offset`` SUBSCRIBE header),
and how much a stream keeps (:class:`StreamLimits`).

The header's values are RabbitMQ's: ``first`` (the oldest message kept),
``last`` (the newest one), ``next`` (only what is published from now on, the
default), ``offset=N`` (from offset N, or the oldest kept if N is gone) and
``timestamp=SECONDS`` (from the first message published at or after that POSIX
time).
"""

from __future__ import annotations

import math

from attrs import field, frozen
from attrs.validators import ge, in_

from stompbroker.protocol.errors import InvalidStreamOffset

#: The SUBSCRIBE header that says where a stream subscription starts, and the
#: MESSAGE header that carries each message's offset (RabbitMQ's name).
OFFSET_HEADER = "x-stream-offset"
#: The header that carries a stream message's append time, in POSIX seconds.
TIMESTAMP_HEADER = "x-stream-timestamp"

#: Largest offset: offsets are 64-bit signed integers for every client's sake.
MAX_OFFSET = 2**63 - 1

#: Defaults of ``--stream-max-age`` (seconds) and ``--stream-max-bytes``.
DEFAULT_MAX_AGE = 7 * 24 * 3600.0
DEFAULT_MAX_BYTES = 256 * 1024 * 1024
#: Bytes of a stream's newest messages kept in memory for readers near the tail.
DEFAULT_CACHE_BYTES = 4 * 1024 * 1024

_NAMED = ("first", "last", "next")


@frozen
class StreamStart:
    """
    A parsed ``x-stream-offset``.

    :ivar kind: ``first``, ``last``, ``next``, ``offset`` or ``timestamp``.
    :ivar value: the offset, or the POSIX time in seconds; 0 for the named kinds.
    """

    kind: str = field(validator=in_((*_NAMED, "offset", "timestamp")))
    value: float = 0


NEXT = StreamStart("next")


def parse_start(value: str | None) -> StreamStart:
    """
    Read an ``x-stream-offset`` header.

    :param value: the header's value, or ``None`` when the SUBSCRIBE has none.
    :returns: where to start; ``next`` without a header.
    :raises InvalidStreamOffset: for anything else than the five forms.
    """
    if value is None:
        return NEXT
    if value in _NAMED:
        return StreamStart(value)
    kind, equals, number = value.partition("=")
    if equals and kind == "offset" and number.isdigit() and int(number) <= MAX_OFFSET:
        return StreamStart("offset", int(number))
    if equals and kind == "timestamp":
        try:
            seconds = float(number)
        except ValueError:
            seconds = math.nan
        if math.isfinite(seconds) and seconds >= 0:
            return StreamStart("timestamp", seconds)
    raise InvalidStreamOffset(
        "invalid x-stream-offset header",
        f"x-stream-offset must be first, last, next, offset=N (N an integer of 0 to"
        f" {MAX_OFFSET}) or timestamp=SECONDS (a POSIX time), got {value!r}",
    )


@frozen
class StreamLimits:
    """
    How much each stream keeps (``--stream-max-age``, ``--stream-max-bytes``), and
    how much of it stays in memory.

    Retention drops whole segments (an eighth of ``max_bytes`` each, or an
    eighth of ``max_age``), oldest first, as RabbitMQ does: a stream may hold up
    to one segment more than ``max_bytes`` allows, and its oldest messages may
    outlive ``max_age`` by up to an eighth of it.

    :ivar max_age: seconds a message is kept; 0 for no limit.
    :ivar max_bytes: bytes (bodies and headers) a stream keeps; at least 1.
    :ivar cache_bytes: bytes of the newest messages kept in memory, from which
        readers near the tail read without the store.
    """

    max_age: float = field(default=DEFAULT_MAX_AGE, validator=ge(0))
    max_bytes: int = field(default=DEFAULT_MAX_BYTES, validator=ge(1))
    cache_bytes: int = field(default=DEFAULT_CACHE_BYTES, validator=ge(0))

    @property
    def segment_bytes(self) -> int:
        """Bytes after which a segment closes."""
        return max(1, self.max_bytes // 8)

    @property
    def segment_age(self) -> float:
        """Seconds after its first message when a segment closes; ``inf`` without ``max_age``."""
        return self.max_age / 8 if self.max_age else math.inf
