"""
Duplicate detection: the ids of the SENDs each destination saw lately.

A client that lost the RECEIPT of a SEND with its connection cannot tell
whether the broker routed it, so a careful client sends it again; with a
duplicate-detection id on the SEND (:data:`DUPLICATE_ID_HEADERS`: ours,
``duplicate-id``, or Artemis's ``_AMQ_DUPL_ID``), the broker routes the first
and answers a repeat with its RECEIPT alone.  As Artemis's id cache and NATS
JetStream's ``Nats-Msg-Id`` window do, each destination remembers a bounded
window of ids: at most ``count`` of them, none older than ``seconds``; an id
that has left the window is new again.  The bounds are the destination's
policy's ``duplicate-window-ids`` and ``duplicate-window`` (docs/policies.md),
else :data:`DEFAULT_WINDOW_IDS` and :data:`DEFAULT_WINDOW_MS`.

Pure: the engine that holds a :class:`DuplicateWindows` passes the time in, and
keeps the ids of persistent messages in its store (and reads them back with
:meth:`DuplicateWindows.seed` at start).
"""

from __future__ import annotations

from collections import OrderedDict

from stompbroker.protocol.frames import Headers

__all__ = [
    "DEFAULT_WINDOW_IDS",
    "DEFAULT_WINDOW_MS",
    "DUPLICATE_ID_HEADERS",
    "DuplicateWindows",
    "duplicate_id_of",
]

#: The SEND headers that carry a duplicate-detection id: ours, and Artemis's.
DUPLICATE_ID_HEADERS: frozenset[str] = frozenset({"duplicate-id", "_AMQ_DUPL_ID"})
#: Ids a destination remembers by default (Artemis's ``id-cache-size``).
DEFAULT_WINDOW_IDS = 20_000
#: How long, in ms, a destination remembers an id by default (JetStream's ``duplicate_window``).
DEFAULT_WINDOW_MS = 120_000


def duplicate_id_of(headers: Headers) -> str | None:
    """:returns: the first duplicate-detection id among ``headers``, or ``None``."""
    for name, value in headers:
        if name in DUPLICATE_ID_HEADERS:
            return value
    return None


class DuplicateWindows:
    """
    Each destination's window of recent duplicate-detection ids, oldest first.

    :ivar evicted: ids that left a window, per destination, since the owner last
        took them (:meth:`take_evicted`): what its store may forget.
    """

    def __init__(self) -> None:
        self._windows: dict[str, OrderedDict[str, float]] = {}
        self.evicted: dict[str, list[str]] = {}

    def first_time(
        self, destination: str, duplicate_id: str, now: float, count: int, seconds: float
    ) -> bool:
        """
        Whether ``duplicate_id`` is new to ``destination``'s window; a new one
        joins it.

        :param now: the time, in seconds.
        :param count: the most ids the window keeps (0: detection is off).
        :param seconds: how long the window keeps an id.
        :returns: ``False`` for an id seen within the window: the SEND is a repeat.
        """
        if count <= 0:
            return True
        window = self._windows.get(destination)
        if window is None:
            window = self._windows[destination] = OrderedDict()
        self._expire(destination, window, now - seconds)
        if duplicate_id in window:
            return False
        window[duplicate_id] = now
        while len(window) > count:
            self._evict(destination, window)
        return True

    def forget(self, destination: str, duplicate_id: str) -> None:
        """Take an id out of its window: its SEND was not stored after all, so a retry is new."""
        window = self._windows.get(destination)
        if window is not None:
            window.pop(duplicate_id, None)

    def seed(self, destination: str, duplicate_id: str, now: float, count: int) -> None:
        """
        Put back an id the store kept, as seen ``now`` (at start: its window
        starts again), keeping the newest ``count`` ids of the destination.
        """
        if count <= 0:
            return
        window = self._windows.setdefault(destination, OrderedDict())
        window.pop(duplicate_id, None)
        window[duplicate_id] = now
        while len(window) > count:
            self._evict(destination, window)

    def size(self, destination: str) -> int:
        """:returns: how many ids ``destination``'s window holds now."""
        window = self._windows.get(destination)
        return 0 if window is None else len(window)

    def take_evicted(self) -> dict[str, list[str]]:
        """:returns: the ids evicted since the last call, per destination; forgets them."""
        evicted, self.evicted = self.evicted, {}
        return evicted

    def _expire(self, destination: str, window: OrderedDict[str, float], before: float) -> None:
        while window:
            oldest = next(iter(window.values()))
            if oldest > before:
                return
            self._evict(destination, window)

    def _evict(self, destination: str, window: OrderedDict[str, float]) -> None:
        gone, _ = window.popitem(last=False)
        self.evicted.setdefault(destination, []).append(gone)
