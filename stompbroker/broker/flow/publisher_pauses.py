"""
Flow control: which publishers are paused and why, and how much memory the broker uses.

Two things make the broker stop reading from a publisher's socket (through
:meth:`stompbroker.interfaces.IConnection.pause_reading`, which the transport
turns into ``pauseProducing``):

- the **memory watermark**: while the memory in use is above the high mark,
  every connection that publishes is paused after its SEND, until memory falls
  below the low mark (:class:`MemoryWatch`);
- a **slow subscriber under the** ``block`` **policy**: a publisher whose
  message reached a subscriber whose buffer is full is paused until that
  subscriber has caught up.

A publisher may be held for several reasons at once and resumes when none is
left; :class:`Throttle` keeps the reasons.  Subscribers are never paused for
memory: their ACKs and their reading are what frees it.

Memory in use is what the allocators hand out (:func:`allocated_bytes_with`),
not the resident set size: CPython and glibc keep freed memory mapped, so RSS
rarely falls after a peak, and a watermark on it could pause publishers for
ever once the queues had drained.  But glibc's ``mallinfo2`` walks every free
chunk of every arena: 0.2 ms on an idle broker, 0.5 ms under a queue load,
milliseconds on a fragmented heap, four times a second, during which no client
is served.  So while memory is below the high mark a cheap figure that is never
below it (:func:`resident_and_swapped_bytes`, what the process holds in RAM and
swap, plus pymalloc's estimate once more) is read first, and the walk is made
only when that figure is over the mark (see :class:`MemoryWatch`'s ``bound``).
"""

from __future__ import annotations

import ctypes
import os
import sys
from collections.abc import Callable
from typing import Any

#: What one pymalloc block is taken to cost, arena and pool overhead included.
#: Blocks hold the small objects (up to 512 bytes) of which messages are made.
PYMALLOC_BLOCK_BYTES = 96


class _MallInfo2(ctypes.Structure):
    """glibc's ``struct mallinfo2`` (glibc 2.33 and later)."""

    _fields_ = [
        (name, ctypes.c_size_t)
        for name in (
            "arena",
            "ordblks",
            "smblks",
            "hblks",
            "hblkhd",
            "usmblks",
            "fsmblks",
            "uordblks",
            "fordblks",
            "keepcost",
        )
    ]
    # Declared for type checkers, which cannot read ``_fields_``.
    hblkhd: int
    uordblks: int


def _glibc_mallinfo2() -> Callable[[], _MallInfo2] | None:
    """:returns: glibc's ``mallinfo2``, or ``None`` where the C library has none."""
    try:
        function = ctypes.CDLL(None).mallinfo2
    except (AttributeError, OSError):
        return None
    function.restype = _MallInfo2
    function.argtypes = []
    result: Callable[[], _MallInfo2] = function
    return result


def allocated_bytes_with(mallinfo2: Callable[[], _MallInfo2]) -> Callable[[], int]:
    """
    :param mallinfo2: glibc's ``mallinfo2``.
    :returns: a gauge: bytes malloc has handed out (heap and mmapped chunks, which
        hold message bodies over 512 bytes) plus an estimate of pymalloc's, which
        ``mallinfo2`` does not see because pymalloc maps its arenas itself.
    """

    def allocated_bytes() -> int:
        info = mallinfo2()
        return info.uordblks + info.hblkhd + sys.getallocatedblocks() * PYMALLOC_BLOCK_BYTES

    return allocated_bytes


def resident_bytes() -> int:
    """:returns: the process's resident set size, from ``/proc/self/statm``."""
    with open("/proc/self/statm", "rb") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def resident_and_swapped_bytes() -> int:
    """
    :returns: what the process holds in RAM and in swap (``VmRSS`` plus
        ``VmSwap`` of ``/proc/self/status``): never below what malloc handed
        out and the broker wrote to, which is all of what it holds (message
        bodies are written when they are made), and cheap to read.
    """
    total = 0
    with open("/proc/self/status", "rb") as status:
        for line in status:
            if line.startswith((b"VmRSS:", b"VmSwap:")):
                total += int(line.split()[1]) * 1024
    return total


def allocated_bound() -> int:
    """
    :returns: a figure never below :func:`allocated_bytes_with`'s, for a
        fraction of its cost: RAM and swap in use, plus pymalloc's estimate
        (which RAM counts already: the figure errs high).
    """
    return resident_and_swapped_bytes() + sys.getallocatedblocks() * PYMALLOC_BLOCK_BYTES


def memory_gauge() -> tuple[Callable[[], int] | None, str]:
    """
    Choose how to measure the memory the broker uses.

    :returns: the gauge (``None`` if nothing can be measured here) and its name
        for the log: ``allocated`` with glibc, else ``resident`` (RSS, which
        may stay above the low mark after a peak) where ``/proc`` exists.
    """
    mallinfo2 = _glibc_mallinfo2()
    if mallinfo2 is not None:
        return allocated_bytes_with(mallinfo2), "allocated"
    if os.path.exists("/proc/self/statm"):
        return resident_bytes, "resident"
    return None, "none"


def physical_memory() -> int:
    """:returns: the machine's memory in bytes, or 0 if it cannot be told."""
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, ValueError, OSError):
        return 0


class Throttle:
    """
    The publishers whose reading is paused, each with the reasons it is paused for.

    A reason is any hashable: :data:`MEMORY`, or the slow subscriber connection
    that a publisher is waiting for.
    """

    __slots__ = ("_reasons", "_held")

    def __init__(self) -> None:
        #: connection -> why it is paused.
        self._reasons: dict[Any, set[Any]] = {}
        #: reason -> the connections it holds.
        self._held: dict[Any, set[Any]] = {}

    def __len__(self) -> int:
        """:returns: how many connections are paused."""
        return len(self._reasons)

    def __contains__(self, connection: Any) -> bool:
        return connection in self._reasons

    def held_for(self, reason: Any) -> int:
        """:returns: how many connections ``reason`` holds now."""
        return len(self._held.get(reason, ()))

    def hold(self, connection: Any, reason: Any) -> None:
        """
        Pause reading from ``connection`` (if it is not already) for ``reason``.

        :param connection: an :class:`~stompbroker.interfaces.IConnection`.
        """
        reasons = self._reasons.get(connection)
        if reasons is None:
            reasons = self._reasons[connection] = set()
            connection.pause_reading()
        reasons.add(reason)
        self._held.setdefault(reason, set()).add(connection)

    def release(self, reason: Any) -> None:
        """Drop ``reason``; resume every connection it was the last reason for."""
        for connection in self._held.pop(reason, ()):
            reasons = self._reasons[connection]
            reasons.discard(reason)
            if not reasons:
                del self._reasons[connection]
                connection.resume_reading()

    def forget(self, connection: Any) -> None:
        """A connection has gone: drop it, and release what it was a reason for."""
        for reason in self._reasons.pop(connection, ()):
            held = self._held[reason]
            held.discard(connection)
            if not held:
                del self._held[reason]
        self.release(connection)


#: The reason publishers are paused for while memory is over the high mark.
MEMORY = "memory"


class MemoryWatch:
    """
    Samples memory in use on a timer and reports crossing the marks.

    :param clock: ``callLater``; the reactor or a ``task.Clock``.
    :param gauge: returns the bytes in use.
    :param high: above this, :attr:`on_high` is called (once per crossing).
    :param low: below this, after a crossing of ``high``, :attr:`on_low` is called.
    :param interval: seconds between samples.
    :param on_high: called when memory goes over ``high``.
    :param on_low: called when memory falls under ``low`` again.
    :param shed: drops memory the broker can do without (resume buffers of
        absent clients) and returns the bytes it dropped; called while memory
        is over ``high`` (and, once over, until it is under ``low``), again and
        again until memory is under ``low`` or it drops nothing more, before
        ``on_high`` is considered: what can be dropped goes before publishers
        are paused.
    :param bound: a cheaper figure never below ``gauge``'s; while memory is
        not over ``high``, a sample whose bound is at most ``high`` stops
        there, and ``gauge`` is read only when the bound is over it.

    :ivar over: whether memory went over ``high`` and has not fallen under ``low`` since.
    :ivar last: the last sample, in bytes (the bound's, when that sufficed).
    """

    def __init__(
        self,
        clock: Any,
        gauge: Callable[[], int],
        high: int,
        low: int,
        on_high: Callable[[int], None],
        on_low: Callable[[int], None],
        interval: float = 0.25,
        shed: Callable[[], int] | None = None,
        bound: Callable[[], int] | None = None,
    ) -> None:
        self._clock = clock
        self._gauge = gauge
        self._bound = bound
        self.high = high
        self.low = low
        self._on_high = on_high
        self._on_low = on_low
        self._interval = interval
        self._shed = shed
        self._call: Any = None
        self.over = False
        self.last = 0

    def start(self) -> None:
        """Sample now, and every ``interval`` seconds until :meth:`stop`."""
        if self._call is None:
            self._sample()

    def stop(self) -> None:
        """Stop sampling."""
        if self._call is not None and self._call.active():
            self._call.cancel()
        self._call = None

    def _sample(self) -> None:
        self._call = self._clock.callLater(self._interval, self._sample)
        bound = self._bound
        if bound is not None and not self.over:
            rough = bound()
            if rough <= self.high:
                self.last = rough
                return
        used = self._gauge()
        shed = self._shed
        if shed is not None and (self.over or used > self.high):
            while used >= self.low and shed():
                used = self._gauge()
        self.last = used
        if not self.over and used > self.high:
            self.over = True
            self._on_high(used)
        elif self.over and used < self.low:
            self.over = False
            self._on_low(used)
