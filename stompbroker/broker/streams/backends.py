"""
Where a stream's entries live: :class:`IStreamBackend`, and
:class:`MemoryStreamBackend`, which keeps them in this process (a broker without
a data directory, and tests).
"""

from __future__ import annotations

import bisect
from collections import deque

from attrs import frozen
from twisted.internet.defer import Deferred, succeed
from zope.interface import Interface, implementer

from stompbroker.broker.streams.entries import Segment, StreamEntry


@frozen
class RecoveredStream:
    """
    A stream as a store gives it back at start.

    :ivar destination: ``/stream/NAME``.
    :ivar next_offset: the offset its next message gets.
    :ivar segments: its entries' segments, oldest first.
    """

    destination: str
    next_offset: int
    segments: list[Segment]


class IStreamBackend(Interface):
    """
    Keeps the entries of streams, in offset order, until retention trims them.

    Writes are issued in order and applied in order; a read sees every write
    issued before it.
    """

    def append(destination, entry):  # type: ignore[no-untyped-def]
        """
        Keep one more entry, the newest of its stream.

        :returns: ``None`` if it is kept once the call returns, else a Deferred
            that fires once it is durable (the SEND's RECEIPT waits on it).
        """

    def read(destination, offset, limit):  # type: ignore[no-untyped-def]
        """
        :returns: a Deferred firing with up to ``limit``
            :class:`~stompbroker.broker.streams.entries.StreamEntry` of the
            stream, those at ``offset`` and after, in order.
        """

    def trim(destination, first):  # type: ignore[no-untyped-def]
        """Forget the stream's entries before offset ``first``; nothing waits on it."""

    def recover(limits):  # type: ignore[no-untyped-def]
        """
        :param limits: the :class:`~stompbroker.broker.streams.offsets.StreamLimits`
            to cut segments by.
        :returns: a Deferred firing with a :class:`RecoveredStream` per stream kept.
        """


@implementer(IStreamBackend)
class MemoryStreamBackend:
    """Entries in this process's memory: every stream is empty at start."""

    def __init__(self) -> None:
        self._streams: dict[str, deque[StreamEntry]] = {}

    def append(self, destination: str, entry: StreamEntry) -> None:
        """Keep ``entry``; it is kept at once."""
        entries = self._streams.get(destination)
        if entries is None:
            entries = self._streams[destination] = deque()
        entries.append(entry)

    def read(self, destination: str, offset: int, limit: int) -> Deferred[list[StreamEntry]]:
        """:returns: a fired Deferred of the entries at ``offset`` and after."""
        entries = self._streams.get(destination, ())
        start = bisect.bisect_left(entries, offset, key=_offset)
        return succeed([entries[index] for index in range(start, min(len(entries), start + limit))])

    def trim(self, destination: str, first: int) -> None:
        """Forget the entries before ``first``."""
        entries = self._streams.get(destination)
        while entries and entries[0].offset < first:
            entries.popleft()

    def recover(self, limits: object) -> Deferred[list[RecoveredStream]]:
        """:returns: nothing survives a process."""
        return succeed([])

    def held(self, destination: str) -> int:
        """:returns: how many entries the stream holds, for tests."""
        return len(self._streams.get(destination, ()))


def _offset(entry: StreamEntry) -> int:
    return entry.offset
