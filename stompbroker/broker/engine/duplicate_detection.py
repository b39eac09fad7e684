"""
An engine's duplicate detection: each destination's window of recent
duplicate-detection ids (:mod:`stompbroker.broker.features.duplicate_ids`),
bounded by its policy, and kept in the SQLite store for persistent messages.

The store writes a persistent message's id in the transaction that inserts the
message (:func:`~stompbroker.broker.store.sqlite_records.insert_message`), so an
id the broker acknowledged with a RECEIPT is on disk with its message, and
:meth:`DuplicateDetection.recover` puts the ids back at start.  Ids that leave
a window are forgotten in the store too, in lazy writes of
:data:`FORGET_BATCH` ids (a store holds at most about that many more than the
windows do).  Ids of non-persistent messages live in memory only, as their
messages do.
"""

from __future__ import annotations

import functools
from typing import Any

from twisted.internet.defer import Deferred, succeed

from stompbroker.broker.features.duplicate_ids import (
    DEFAULT_WINDOW_IDS,
    DEFAULT_WINDOW_MS,
    DuplicateWindows,
)
from stompbroker.broker.features.policies import Policies
from stompbroker.broker.store import sqlite_records
from stompbroker.broker.store.sqlite import SQLiteStore

__all__ = ["FORGET_BATCH", "DuplicateDetection"]

#: Evicted ids gathered before one lazy store write forgets them.
FORGET_BATCH = 1000


class DuplicateDetection:
    """
    :param clock: ``seconds()``.
    :param policies: the per-destination policies, for each window's bounds.
    :param store: the engine's message store, or ``None``; only the SQLite
        store keeps ids.
    """

    def __init__(self, clock: Any, policies: Policies, store: Any = None) -> None:
        self._clock = clock
        self._policies = policies
        self._store = store if isinstance(store, SQLiteStore) else None
        self.windows = DuplicateWindows()
        self._evicted = 0

    def bounds(self, destination: str) -> tuple[int, float]:
        """:returns: ``destination``'s window: most ids, and seconds."""
        settings = self._policies.settings_for(destination)
        count, window_ms = DEFAULT_WINDOW_IDS, DEFAULT_WINDOW_MS
        if settings is not None:
            if settings.duplicate_window_ids is not None:
                count = settings.duplicate_window_ids
            if settings.duplicate_window is not None:
                window_ms = settings.duplicate_window
        return count, window_ms / 1000.0

    def first_time(self, destination: str, duplicate_id: str) -> bool:
        """
        :returns: whether a SEND to ``destination`` with ``duplicate_id`` is new
            within its window (it joins the window), rather than a repeat.
        """
        count, seconds = self.bounds(destination)
        windows = self.windows
        first = windows.first_time(destination, duplicate_id, self._clock.seconds(), count, seconds)
        if windows.evicted:
            self._evicted += sum(len(ids) for ids in windows.evicted.values())
            if self._store is None:
                windows.take_evicted()
            elif self._evicted >= FORGET_BATCH:
                self._forget_evicted()
        return first

    def forget(self, destination: str, duplicate_id: str) -> None:
        """Take an id out of its window: its message was not stored, so a retry is new."""
        self.windows.forget(destination, duplicate_id)

    def recover(self) -> Deferred[None]:
        """:returns: a Deferred that fires once the store's ids are back in their windows."""
        if self._store is None:
            return succeed(None)
        read: Deferred[list[tuple[str, str]]] = self._store.submit(
            sqlite_records.read_duplicate_ids, write=False
        )
        return read.addCallback(self._seed)

    def _seed(self, rows: list[tuple[str, str]]) -> None:
        now = self._clock.seconds()
        windows = self.windows
        for destination, duplicate_id in rows:
            windows.seed(destination, duplicate_id, now, self.bounds(destination)[0])
        self._forget_evicted()

    def _forget_evicted(self) -> None:
        self._evicted = 0
        assert self._store is not None
        for destination, ids in self.windows.take_evicted().items():
            work = functools.partial(sqlite_records.delete_duplicate_ids, destination, ids)
            self._store.submit(work).addErrback(lambda _: None)
