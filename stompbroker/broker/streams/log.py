"""
One stream's log: :class:`StreamLog`.

Theory of operation.  An append gives the message the next offset (an integer
that only grows, across restarts too: the store keeps the next one), stamps it
with ``x-stream-offset``, counts it into the newest :class:`Segment`, puts it in
the cache of newest entries, hands it to the backend, and offers it to the
readers that are at the tail.  Retention then drops whole segments from the
head while the stream holds more than ``max_bytes`` or their newest entry is
older than ``max_age``, and tells the backend to forget them.

Memory: the log itself holds its segments (a handful of numbers each) and the
cache, at most ``cache_bytes`` of the newest entries; a reader further back
reads pages from the backend (:meth:`StreamLog.read`), so that no reader makes
the log hold more.  Entries ``cache_start`` and after are all in the cache.

Offsets may be sparse (the Redis engine derives them from entry ids): nothing
here assumes that offset N+1 follows N, only that offsets grow.

A log that is not ``complete`` mirrors a stream kept elsewhere (the Redis
engine's): it learns entries as the server hands them out (:meth:`add_entry`),
from the moment it is made, so only its cache is known here; any read before
the cache goes to the backend, which also keeps retention.
"""

from __future__ import annotations

import bisect
from collections import deque
from typing import Any

from twisted.internet.defer import Deferred

from stompbroker.broker.streams.entries import Segment, StreamEntry, entry_size, stamped
from stompbroker.broker.streams.offsets import StreamLimits, StreamStart
from stompbroker.protocol.message import Message


class StreamLog:
    """
    The log of one ``/stream/NAME``.

    :param destination: its destination.
    :param clock: ``seconds()``: the time entries are stamped with, and retention's.
    :param limits: how much it keeps, and caches.
    :param backend: an :class:`~stompbroker.broker.streams.backends.IStreamBackend`.
    :param next_offset: the offset of its next entry (from the store at start).
    :param segments: its segments (from the store at start), oldest first.
    :param complete: whether it holds every entry of the stream (else it mirrors
        one kept by the backend, see the module docstring).

    :ivar next_offset: the offset the next entry gets.
    :ivar first_offset: the offset of the oldest entry kept (``next_offset`` when empty).
    :ivar last_offset: the offset of the newest entry, or ``None`` when empty.
    :ivar readers: the :class:`~stompbroker.broker.streams.reader.StreamReader` objects
        at the tail, offered each entry as it is appended.
    :ivar attached: every reader with a consumer, wherever it is (for management).
    """

    def __init__(
        self,
        destination: str,
        clock: Any,
        limits: StreamLimits,
        backend: Any,
        next_offset: int = 0,
        segments: list[Segment] | None = None,
        complete: bool = True,
    ) -> None:
        self.destination = destination
        self.complete = complete
        self._clock = clock
        self.limits = limits
        self._backend = backend
        self.next_offset = next_offset
        self.segments: deque[Segment] = deque(segments or ())
        self.size = sum(segment.size for segment in self.segments)
        self.first_offset = self.segments[0].first if self.segments else next_offset
        self.last_offset: int | None = self.segments[-1].last if self.segments else None
        self._cache: deque[StreamEntry] = deque()
        self._cache_size = 0
        self.cache_start = next_offset
        self.readers: set[Any] = set()
        self.attached: set[Any] = set()

    def __repr__(self) -> str:
        return (
            f"<StreamLog {self.destination!r} offsets {self.first_offset}..{self.next_offset},"
            f" {self.size} bytes>"
        )

    @property
    def kept(self) -> int | None:
        """How many entries the stream keeps, when this log knows (not a mirror)."""
        return self.next_offset - self.first_offset if self.complete else None

    @property
    def cached(self) -> int:
        """How many entries the cache holds now."""
        return len(self._cache)

    # -- appending -------------------------------------------------------------

    def append(self, message: Message, offset: int | None = None) -> Deferred[None] | None:
        """
        Add a message at the end of the stream, and offer it to the readers at the tail.

        :param message: as routed; its copy with ``x-stream-offset`` is what readers get.
        :param offset: the offset it was given elsewhere (a remote engine), greater
            than any before; by default :attr:`next_offset`.
        :returns: what the backend's append returns: ``None``, or a Deferred that
            fires once the entry is durable.
        """
        if offset is None:
            offset = self.next_offset
        now = self._clock.seconds()
        entry = self._add(stamped(message, offset, now), offset, now)
        written: Deferred[None] | None = self._backend.append(self.destination, entry)
        self._offer(entry)
        return written

    def add_entry(self, entry: StreamEntry) -> None:
        """Add an entry another process appended (and stored), and offer it to readers."""
        if entry.offset < self.next_offset:
            return
        self._offer(self._add(entry.message, entry.offset, entry.timestamp))

    def _add(self, message: Message, offset: int, timestamp: float) -> StreamEntry:
        size = entry_size(message.headers, message.body)
        entry = StreamEntry(offset, timestamp, message, size)
        self.next_offset = offset + 1
        self.last_offset = offset
        if self.complete:
            # A mirror's retention is the backend's: it keeps no segments.
            segments = self.segments
            if segments and segments[-1].takes(timestamp, self.limits):
                segments[-1].add(offset, timestamp, size)
            else:
                segments.append(Segment(offset, offset, size, timestamp, timestamp))
            if len(segments) == 1 and segments[0].first == offset:
                self.first_offset = offset
            self.size += size
        cache = self._cache
        if not cache:
            self.cache_start = offset
        cache.append(entry)
        self._cache_size += size
        limit = self.limits.cache_bytes
        while self._cache_size > limit and cache:
            self._cache_size -= cache.popleft().size
            self.cache_start = cache[0].offset if cache else self.next_offset
        self.trim(timestamp)
        return entry

    def _offer(self, entry: StreamEntry) -> None:
        if self.readers:
            for reader in list(self.readers):
                reader.appended(entry)

    # -- retention -------------------------------------------------------------

    def trim(self, now: float | None = None) -> int:
        """
        Drop the oldest segments while the stream is over ``max_bytes`` (keeping
        the newest segment), or their newest entry is older than ``max_age``.

        :returns: how many entries' offsets were dropped (the offset range).
        """
        if not self.complete:
            return 0
        if now is None:
            now = self._clock.seconds()
        limits = self.limits
        cutoff = now - limits.max_age if limits.max_age else None
        segments = self.segments
        before = self.first_offset
        while segments and (
            (self.size > limits.max_bytes and len(segments) > 1)
            or (cutoff is not None and segments[0].newest < cutoff)
        ):
            self.size -= segments.popleft().size
        if not segments:
            self.first_offset = self.next_offset
            self.last_offset = None
        else:
            self.first_offset = segments[0].first
        if self.first_offset == before:
            return 0
        cache = self._cache
        while cache and cache[0].offset < self.first_offset:
            self._cache_size -= cache.popleft().size
        self.cache_start = max(self.cache_start, self.first_offset)
        self._backend.trim(self.destination, self.first_offset)
        return self.first_offset - before

    # -- reading ---------------------------------------------------------------

    def start(self, start: StreamStart) -> tuple[int, float]:
        """
        :returns: the offset a subscription that starts at ``start`` reads from
            first, and the earliest timestamp it delivers (0 for all).
        """
        kind = start.kind
        if kind == "first":
            return self.first_offset, 0.0
        if kind == "last":
            return (self.next_offset if self.last_offset is None else self.last_offset), 0.0
        if kind == "offset":
            return min(max(int(start.value), self.first_offset), self.next_offset), 0.0
        if kind == "timestamp":
            # The first segment with an entry that late; the reader skips the
            # earlier entries of that segment.
            for segment in self.segments:
                if segment.newest >= start.value:
                    return segment.first, start.value
            return self.next_offset, start.value
        return self.next_offset, 0.0

    def read(self, offset: int, limit: int) -> list[StreamEntry] | Deferred[list[StreamEntry]]:
        """
        Read up to ``limit`` entries at ``offset`` and after.

        :returns: a list, at once, when they are in the cache (or there are none:
            an empty list means ``offset`` is past the end); else a Deferred of
            them from the backend.
        """
        cache = self._cache
        if self.complete:
            if offset >= self.next_offset:
                return []
            offset = max(offset, self.first_offset)
            in_cache = offset >= self.cache_start
        else:
            in_cache = bool(cache) and offset >= self.cache_start
        if in_cache:
            index = bisect.bisect_left(cache, offset, key=_offset)
            return [cache[i] for i in range(index, min(len(cache), index + limit))]
        read: Deferred[list[StreamEntry]] = self._backend.read(self.destination, offset, limit)
        return read.addCallback(self._kept)

    def forget_cache(self) -> None:
        """
        Empty the cache of a log that mirrors a remote stream, whose entries it may
        have missed (the server's connection was lost): readers read the backend
        until the cache fills again, and those at the tail go back to reading.
        """
        self._cache.clear()
        self._cache_size = 0
        readers, self.readers = self.readers, set()
        for reader in readers:
            reader.pump()

    def _kept(self, entries: list[StreamEntry]) -> list[StreamEntry]:
        """Leave out entries retention dropped while they were being read."""
        if not self.complete:
            return entries
        first = self.first_offset
        if entries and entries[0].offset < first:
            return [entry for entry in entries if entry.offset >= first]
        return entries


def _offset(entry: StreamEntry) -> int:
    return entry.offset
