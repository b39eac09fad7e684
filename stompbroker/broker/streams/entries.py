"""
What a stream holds: :class:`StreamEntry` (one message at its offset) and
:class:`Segment` (a run of entries that retention drops together).
"""

from __future__ import annotations

from collections.abc import Iterable

from attrs import define, frozen

from stompbroker.broker.streams.offsets import OFFSET_HEADER, TIMESTAMP_HEADER, StreamLimits
from stompbroker.protocol.frames import Headers
from stompbroker.protocol.message import Message


@frozen
class StreamEntry:
    """
    One message of a stream.

    :ivar offset: its place in the stream, carried by the message's
        ``x-stream-offset`` header.
    :ivar timestamp: when it was appended, in POSIX seconds.
    :ivar message: the message as every reader gets it, offset header included.
    :ivar size: its bytes, body and headers, as retention counts them.
    """

    offset: int
    timestamp: float
    message: Message
    size: int


_STAMPS = (OFFSET_HEADER, TIMESTAMP_HEADER)


def entry_size(headers: Headers, body: bytes) -> int:
    """:returns: the bytes retention counts for a message: its body and headers."""
    return len(body) + sum(len(name) + len(value) + 2 for name, value in headers)


def stamped(message: Message, offset: int, timestamp: float) -> Message:
    """
    :param timestamp: when it was appended, in POSIX seconds.
    :returns: a copy of a message sent to a stream that carries its offset and
        its append time (``x-stream-timestamp``, seconds with milliseconds), to
        be delivered as it is to every reader (its wire bytes encoded once);
        either header the sender put there is dropped, as the first of a
        repeated header is the one clients read.
    """
    headers = message.headers
    if any(name in _STAMPS for name, _ in headers):
        headers = tuple(pair for pair in headers if pair[0] not in _STAMPS)
    return Message(
        message.destination,
        message.message_id,
        (*headers, (OFFSET_HEADER, str(offset)), (TIMESTAMP_HEADER, f"{timestamp:.3f}")),
        message.body,
        0.0,
        0,
        False,
        message.priority,
    )


def restored(
    destination: str, offset: int, timestamp: float, message_id: str, headers: Headers, body: bytes
) -> StreamEntry:
    """:returns: an entry read back from a store (its headers hold the offset already)."""
    message = Message(destination, message_id, headers, body)
    return StreamEntry(offset, timestamp, message, entry_size(headers, body))


@define
class Segment:
    """
    Consecutive entries of a stream, dropped together when retention calls for it.

    :ivar first: the offset of its first entry.
    :ivar last: the offset of its last entry.
    :ivar size: the bytes of its entries.
    :ivar oldest: the timestamp of its first entry.
    :ivar newest: the timestamp of its last entry.
    """

    first: int
    last: int
    size: int
    oldest: float
    newest: float

    def takes(self, timestamp: float, limits: StreamLimits) -> bool:
        """:returns: whether an entry appended at ``timestamp`` still goes in this segment."""
        return self.size < limits.segment_bytes and timestamp - self.oldest < limits.segment_age

    def add(self, offset: int, timestamp: float, size: int) -> None:
        """Count one more entry in."""
        self.last = offset
        self.size += size
        self.newest = timestamp


def segments_of(rows: Iterable[tuple[int, float, int]], limits: StreamLimits) -> list[Segment]:
    """
    Rebuild a stream's segments from its entries' ``(offset, timestamp, size)``,
    in offset order (at recovery).
    """
    segments: list[Segment] = []
    for offset, timestamp, size in rows:
        if segments and segments[-1].takes(timestamp, limits):
            segments[-1].add(offset, timestamp, size)
        else:
            segments.append(Segment(offset, offset, size, timestamp, timestamp))
    return segments
