"""
How often Python's cyclic garbage collector runs in a broker process.

Messages waiting in a queue are long-lived container objects, and every full
collection walks all of them: with a few hundred thousand messages queued,
Python's default thresholds (700, 10, 10) spend about a tenth of the broker's
CPU in the collector, in pauses of 100 ms and more (benchmarks/JOURNAL.md,
"Garbage collection").  Almost nothing on the message path makes reference
cycles, so the broker collects far less often: the youngest generation after
``threshold`` net allocations instead of 700, and the objects that exist once
the broker has started (modules, classes, recovered messages) are frozen out
of collection altogether with :func:`gc.freeze`.

This is process-wide, so it belongs to the twistd plugin (``--gc-threshold``),
never to the broker library: an application that embeds the broker keeps its
own settings.
"""

from __future__ import annotations

import gc

from twisted.application.service import Service

from stompbroker.logs import logger

log = logger("stompbroker.gc")

#: The youngest generation's threshold the plugin sets by default.
DEFAULT_THRESHOLD = 50_000
#: The older generations' thresholds: collections of the next younger one.
OLDER_THRESHOLDS = (50, 100)


class CollectorTuning(Service):
    """
    Sets the collector's thresholds and freezes the startup objects while running.

    :param threshold: net allocations between two collections of the youngest
        generation.
    """

    name = "gc tuning"

    def __init__(self, threshold: int) -> None:
        self.threshold = threshold
        self._previous: tuple[int, int, int] | None = None

    def startService(self) -> None:
        """Freeze what exists now, and collect less often from here on."""
        super().startService()
        self._previous = gc.get_threshold()
        gc.freeze()
        gc.set_threshold(self.threshold, *OLDER_THRESHOLDS)
        log.info(
            "garbage collector thresholds {thresholds}, {frozen} startup objects frozen",
            thresholds=gc.get_threshold(),
            frozen=gc.get_freeze_count(),
        )

    def stopService(self) -> None:
        """Put the previous thresholds back, and let the frozen objects be collected again."""
        super().stopService()
        if self._previous is not None:
            gc.set_threshold(*self._previous)
            self._previous = None
        gc.unfreeze()
