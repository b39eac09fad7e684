"""
The disk alarm: ``--disk-free-limit``, as RabbitMQ's ``disk_free_limit``.

A broker whose disk fills up can no longer take persistent messages, and, worse,
could no longer write the removals that would free it.  So the room left for the
message store (the disk's free space plus the database's free pages, see
:mod:`stompbroker.broker.store.disk_space`) is sampled on a timer, and while it
is under the limit the connections that publish persistent messages are held
after their SEND (their reading paused, as the memory alarm pauses publishers:
:mod:`stompbroker.broker.flow.backpressure`); they are neither refused nor
closed.  Topics, non-persistent messages and consumers carry on, and their ACKs
free the room that lets the publishers go on, which happens by itself once the
room left is back over the limit plus a tenth (:func:`resume_mark`), so that a
disk hovering at the limit does not flip the alarm at every sample.

The limit is bytes, or a share of the data directory's filesystem
(:class:`DiskFreeLimit`), and 0 turns the alarm off.  A broker without a data
directory (``--data-dir none``) or on the redis engine has no disk to watch.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from attrs import frozen

from stompbroker.broker.store.disk_space import DiskSpace

__all__ = ["DEFAULT_DISK_FREE_LIMIT", "DISK", "DiskAlarm", "DiskFreeLimit", "DiskWatch"]

#: The reason persistent publishers are held for while the disk alarm is on.
DISK = "disk"
#: Most seconds between samples of the disk.
DISK_SAMPLE_INTERVAL = 0.25
#: Fewest seconds between samples, however close the room left is to the limit.
DISK_SAMPLE_LEAST = 0.01
#: The fastest the store is taken to fill the disk, in bytes a second: the next
#: sample comes before the room left could have fallen under the limit at this
#: rate (RabbitMQ's disk monitor spaces its checks the same way), so a producer
#: of large messages cannot fill what is left between two samples.
FASTEST_FILL = 1 << 30
#: The share of the limit the room left must be back over before the alarm ends.
RESUME_SHARE = 0.1


@frozen
class DiskFreeLimit:
    """
    How much room the message store's disk must keep free.

    :ivar size: bytes; used when ``share`` is 0.
    :ivar share: a share of the data directory's filesystem, between 0 and 1.
    """

    size: int = 0
    share: float = 0.0

    @property
    def enabled(self) -> bool:
        """Whether the alarm runs at all."""
        return bool(self.size or self.share)

    def of(self, total: int) -> int:
        """:returns: the limit in bytes, on a filesystem of ``total`` bytes."""
        if self.share:
            return int(total * self.share)
        return self.size

    def __str__(self) -> str:
        """:returns: the limit as an option would give it: ``5%``, ``50M``, ``1234``."""
        if self.share:
            return f"{self.share:.0%}"
        for unit, shift in (("G", 30), ("M", 20), ("K", 10)):
            if self.size and not self.size % (1 << shift):
                return f"{self.size >> shift}{unit}"
        return str(self.size)


#: RabbitMQ's default: 50 MB.
DEFAULT_DISK_FREE_LIMIT = DiskFreeLimit(size=50 << 20)


def resume_mark(limit: int) -> int:
    """:returns: the room over which an alarm under ``limit`` ends."""
    return limit + int(limit * RESUME_SHARE)


@frozen
class DiskAlarm:
    """
    The disk alarm as an operator sees it (the console, ``/api/overview``, ``/metrics``).

    :ivar enabled: whether it runs (a data directory, and a limit not 0).
    :ivar alarm: the room left went under the limit and has not come back since:
        persistent publishers are held after each SEND.
    :ivar free: the room left at the latest sample, in bytes (0 when off).
    :ivar total: the size of the data directory's filesystem, in bytes.
    :ivar limit: the limit in bytes at the latest sample.
    :ivar since: when the alarm went off, in clock seconds; ``None`` without an alarm.
    :ivar held_publishers: connections held now for the disk.
    """

    enabled: bool
    alarm: bool
    free: int
    total: int
    limit: int
    since: float | None
    held_publishers: int


class DiskWatch:
    """
    Samples the room left for the store on a timer and reports crossing the limit.

    :param clock: ``callLater``; the reactor or a ``task.Clock``.
    :param probe: returns the room left (the store's ``disk_space``), or ``None``
        when it cannot be told now (the sample is skipped).
    :param limit: the limit.
    :param on_low: called with the sample and the limit in bytes when the room
        goes under the limit.
    :param on_ok: called likewise when it is back over :func:`resume_mark`.
    :param interval: most seconds between samples (fewer near the limit).

    :ivar low: whether the room went under the limit and has not come back since.
    :ivar last: the last sample, ``None`` before the first.
    """

    def __init__(
        self,
        clock: Any,
        probe: Callable[[], DiskSpace | None],
        limit: DiskFreeLimit,
        on_low: Callable[[DiskSpace, int], None],
        on_ok: Callable[[DiskSpace, int], None],
        interval: float = DISK_SAMPLE_INTERVAL,
    ) -> None:
        self._probe = probe
        self.limit = limit
        self._on_low = on_low
        self._on_ok = on_ok
        self._interval = interval
        self._clock = clock
        self._call: Any = None
        self.low = False
        self.last: DiskSpace | None = None

    def start(self) -> None:
        """Sample now, and then as :meth:`_next_sample` says until :meth:`stop`."""
        if self._call is None:
            self._sample()

    def stop(self) -> None:
        """Stop sampling."""
        if self._call is not None and self._call.active():
            self._call.cancel()
        self._call = None

    def limit_bytes(self) -> int:
        """:returns: the limit in bytes, on the filesystem of the last sample."""
        return self.limit.of(self.last.total if self.last is not None else 0)

    def _next_sample(self, space: DiskSpace | None) -> float:
        """
        :returns: the seconds until the next sample: ``interval``, or less as the
            room left nears the limit, so that it is sampled again before it
            could have reached the limit at :data:`FASTEST_FILL`.  (Not Twisted's
            ``LoopingCall``: its interval is fixed.)
        """
        if space is None or self.low:
            return self._interval
        margin = space.free - self.limit.of(space.total)
        return min(self._interval, max(DISK_SAMPLE_LEAST, margin / FASTEST_FILL))

    def _sample(self) -> None:
        space = self._probe()
        try:
            if space is not None:
                self._judge(space)
        finally:
            self._call = self._clock.callLater(self._next_sample(space), self._sample)

    def _judge(self, space: DiskSpace) -> None:
        self.last = space
        limit = self.limit.of(space.total)
        if not self.low and space.free < limit:
            self.low = True
            self._on_low(space, limit)
        elif self.low and space.free >= resume_mark(limit):
            self.low = False
            self._on_ok(space, limit)
