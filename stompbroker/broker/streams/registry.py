"""
The streams of one engine: :class:`Streams`, which makes each
:class:`~stompbroker.broker.streams.log.StreamLog` on first use, gives
subscriptions their :class:`~stompbroker.broker.streams.reader.StreamReader`,
rebuilds the logs from the backend at start and, while any stream has a
``max_age``, sweeps them for age once per eighth of it (at most once a minute)
so that a stream nobody appends to is trimmed too.

Replaying a stream for code other than a subscription (a resumed session's
missed messages): :meth:`Streams.read` gives a page of entries from an offset,
on either engine; a cursor that delivers to any
:class:`~stompbroker.interfaces.ISubscriber` from an offset and then live is
the engine's ``stream_reader`` (:meth:`Streams.reader` is the local engine's,
whose logs hold every entry; the redis engine finds positions in its server).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from twisted.internet.defer import Deferred, maybeDeferred, succeed

from stompbroker.broker.streams.backends import RecoveredStream
from stompbroker.broker.streams.entries import StreamEntry
from stompbroker.broker.streams.log import StreamLog
from stompbroker.broker.streams.offsets import StreamLimits, StreamStart
from stompbroker.broker.streams.reader import StreamReader
from stompbroker.protocol.message import Message

if TYPE_CHECKING:
    from stompbroker.broker.flow.traffic import Traffic

#: Most seconds between two sweeps for age.
MAX_SWEEP_INTERVAL = 60.0


class Streams:
    """
    Every ``/stream/`` destination of one engine.

    :param clock: ``seconds`` and ``callLater`` (a reactor or a ``task.Clock``).
    :param limits: each stream's :class:`StreamLimits`.
    :param backend: an :class:`~stompbroker.broker.streams.backends.IStreamBackend`.
    :param complete: whether its logs hold their streams' every entry (else they
        mirror streams the backend keeps, and the backend trims them).
    :param traffic: the counters its readers count deliveries in (the engine
        counts appends, as it counts a queue's SENDs); ``None`` counts nothing.

    :ivar logs: destination -> its log.
    """

    def __init__(
        self,
        clock: Any,
        limits: StreamLimits,
        backend: Any,
        complete: bool = True,
        traffic: Traffic | None = None,
    ) -> None:
        self.clock = clock
        self.traffic = traffic
        self.limits = limits
        self.backend = backend
        self.complete = complete
        self.logs: dict[str, StreamLog] = {}
        self._sweep: Any = None

    def log(self, destination: str) -> StreamLog:
        """:returns: the log of ``destination``, made (empty) on first use."""
        stream = self.logs.get(destination)
        if stream is None:
            stream = self.logs[destination] = StreamLog(
                destination, self.clock, self.limits, self.backend, complete=self.complete
            )
            self._schedule_sweep()
        return stream

    def append(self, message: Message) -> Deferred[None] | None:
        """
        Append a message sent to its stream.

        :returns: ``None``, or a Deferred that fires once it is durable.
        """
        stream = self.logs.get(message.destination) or self.log(message.destination)
        return stream.append(message)

    def reader(self, destination: str, start: StreamStart) -> StreamReader:
        """
        :returns: a new cursor on ``destination``'s stream at ``start``; it reads
            once given a consumer (:meth:`StreamReader.add_consumer`).
        """
        stream = self.log(destination)
        position, since = stream.start(start)
        return StreamReader(stream, self.clock, position, since, self.traffic)

    def read(self, destination: str, offset: int, limit: int) -> Deferred[list[StreamEntry]]:
        """
        Read up to ``limit`` entries of a stream at ``offset`` and after (each
        entry's ``message`` carries ``x-stream-offset``); read the next page from
        the last entry's offset plus one.  An offset older than the oldest kept
        reads from the oldest kept.

        :returns: a Deferred firing with the entries, ``[]`` at the end.
        """
        # A mirror is made, so that a remote engine reads its server.
        stream = self.logs.get(destination) if self.complete else self.log(destination)
        got = [] if stream is None else stream.read(offset, limit)
        return succeed(got) if isinstance(got, list) else got

    def restore(self, recovered: list[RecoveredStream]) -> None:
        """Rebuild the logs the backend kept (at start, before any client)."""
        for kept in recovered:
            self.logs[kept.destination] = StreamLog(
                kept.destination,
                self.clock,
                self.limits,
                self.backend,
                kept.next_offset,
                kept.segments,
            )
        if self.logs:
            self._schedule_sweep()

    def recover(self) -> Deferred[None]:
        """:returns: a Deferred that fires once the backend's streams are restored."""
        recovered: Deferred[list[RecoveredStream]] = maybeDeferred(
            self.backend.recover, self.limits
        )
        return recovered.addCallback(self.restore)

    def stop(self) -> None:
        """Stop sweeping."""
        if self._sweep is not None and self._sweep.active():
            self._sweep.cancel()
        self._sweep = None

    def sweep(self) -> None:
        """Trim every stream for age now."""
        self._sweep = None
        now = self.clock.seconds()
        for stream in self.logs.values():
            stream.trim(now)
        self._schedule_sweep()

    def _schedule_sweep(self) -> None:
        if self._sweep is None and self.limits.max_age and self.complete:
            interval = min(self.limits.segment_age, MAX_SWEEP_INTERVAL)
            self._sweep = self.clock.callLater(interval, self.sweep)
