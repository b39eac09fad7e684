"""
CPU, memory and latency figures: from ``/proc``, from ``os.times`` and from samples.

Everything here is cheap and called outside the timed loops, except
:func:`own_cpu_seconds`, which each worker reads once at "go" and once at the end.
CPU figures are percentages of one core (200 means both cores of a two-core
machine), as ``top`` shows them.
"""

from __future__ import annotations

import os
import threading
from array import array
from collections.abc import Iterable

from attrs import frozen

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def own_cpu_seconds() -> float:
    """:returns: CPU seconds (user and system) this process has used so far."""
    times = os.times()
    return times.user + times.system


def process_cpu_seconds(pid: int) -> float | None:
    """
    :param pid: any process on this machine.
    :returns: the CPU seconds it has used, all threads, or ``None`` if it is gone.
    """
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            fields = stat.read().rsplit(b")", 1)[1].split()
    except OSError:
        return None
    # Fields 14 and 15 (utime, stime) of proc(5), counted after the command name.
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def process_rss_kb(pid: int) -> int | None:
    """:returns: the process's resident set (VmRSS) in kB, or ``None`` if it is gone."""
    try:
        with open(f"/proc/{pid}/status", "rb") as status:
            for line in status:
                if line.startswith(b"VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def resident_bytes(pid: int) -> int:
    """:returns: the process's resident set in bytes, 0 once it has gone."""
    return (process_rss_kb(pid) or 0) * 1024


class RssSampler:
    """
    Samples a process's resident set on a thread of its own, from when it is made
    until :meth:`stop`, keeping the peak and the last sample.

    :param pid: the process.
    :param every: seconds between samples.
    """

    def __init__(self, pid: int, every: float = 0.5) -> None:
        self.pid = pid
        self.peak = 0
        self.last = 0
        self._every = every
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name="rss", daemon=True)
        self._thread.start()

    def _sample(self) -> None:
        self.last = resident_bytes(self.pid) or self.last
        self.peak = max(self.peak, self.last)

    def _run(self) -> None:
        while not self._stopping.is_set():
            self._sample()
            self._stopping.wait(self._every)

    def stop(self) -> int:
        """Take a last sample and stop. :returns: the peak, in bytes."""
        self._stopping.set()
        self._thread.join()
        self._sample()
        return self.peak


def process_fd_count(pid: int) -> int | None:
    """:returns: how many file descriptors the process holds, or ``None`` if unreadable."""
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return None


def process_fd_limit(pid: int) -> int | None:
    """:returns: the process's soft limit on open files, or ``None`` if unreadable or unlimited."""
    try:
        with open(f"/proc/{pid}/limits", "rb") as limits:
            for line in limits:
                if line.startswith(b"Max open files"):
                    soft = line.split()[3]
                    return int(soft) if soft.isdigit() else None
    except OSError:
        return None
    return None


def machine_cpu_ticks() -> tuple[int, int]:
    """:returns: ``(busy, total)`` clock ticks of all CPUs since boot, from ``/proc/stat``."""
    with open("/proc/stat", "rb") as stat:
        fields = [int(value) for value in stat.readline().split()[1:]]
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
    total = sum(fields[:8])
    return total - idle, total


@frozen
class CpuSnapshot:
    """
    CPU counters at one moment, so a run can report its share of the machine.

    :ivar wall: ``time.monotonic()``.
    :ivar broker: the broker's CPU seconds, when its pid is known.
    :ivar machine: :func:`machine_cpu_ticks`.
    """

    wall: float
    broker: float | None
    machine: tuple[int, int]

    @classmethod
    def take(cls, wall: float, pid: int | None) -> CpuSnapshot:
        """:param wall: ``time.monotonic()`` now.  :param pid: the broker's, if known."""
        return cls(wall, process_cpu_seconds(pid) if pid else None, machine_cpu_ticks())


def cpu_between(before: CpuSnapshot, after: CpuSnapshot) -> dict[str, float | None]:
    """
    :returns: ``broker_cpu_pct`` and ``machine_cpu_pct`` over the interval, in percent of one core.
    """
    wall = max(after.wall - before.wall, 1e-9)
    broker = None
    if before.broker is not None and after.broker is not None:
        broker = round((after.broker - before.broker) / wall * 100, 1)
    busy = after.machine[0] - before.machine[0]
    total = max(after.machine[1] - before.machine[1], 1)
    machine = round(busy / total * (os.cpu_count() or 1) * 100, 1)
    return {"broker_cpu_pct": broker, "machine_cpu_pct": machine}


def percentiles(
    samples_ns: array, points: Iterable[float] = (50, 90, 99, 99.9)
) -> dict[str, float]:
    """
    Latency percentiles by the nearest-rank method, in milliseconds.

    :param samples_ns: latencies in nanoseconds.
    :param points: the percentiles wanted.
    :returns: ``p50_ms`` and the like, plus ``max_ms`` and ``mean_ms``; empty without samples.
    """
    if not samples_ns:
        return {}
    ordered = sorted(samples_ns)
    count = len(ordered)
    figures = {}
    for point in points:
        # ceil(point% of count) in integers: tenths of a percent avoid float rounding.
        rank = max(1, -(-round(point * 10) * count // 1000))
        label = f"p{point:g}".replace(".", "_")
        figures[f"{label}_ms"] = round(ordered[min(rank, count) - 1] / 1e6, 3)
    figures["max_ms"] = round(ordered[-1] / 1e6, 3)
    figures["mean_ms"] = round(sum(ordered) / count / 1e6, 3)
    return figures


def merge_seen(maps: Iterable[bytes]) -> tuple[int, int]:
    """
    Combine the seen-maps of competing consumers (one byte per ``seq``, 0 or 1).

    Each map becomes one big integer, so the union and the overlaps are bitwise
    operations at C speed, however many messages the run had.

    :param maps: one per consumer.
    :returns: ``(distinct, overlapping)``: how many ``seq`` values some consumer
        saw, and how many times one was seen by another consumer as well.
    """
    union = 0
    overlapping = 0
    for seen in maps:
        bits = int.from_bytes(seen, "little")
        overlapping += (union & bits).bit_count()
        union |= bits
    return union.bit_count(), overlapping
