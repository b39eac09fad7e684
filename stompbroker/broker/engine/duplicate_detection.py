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

:meth:`DuplicateDetection.route_once` is what the router calls for a SEND that
carries an id (:class:`RoutesOnce`, which the redis engine's
:class:`~stompbroker.broker.engine.redis.duplicates.ClusterDuplicates` states
too: there the windows are in Redis, shared by every node).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, Protocol

from twisted.internet.defer import Deferred, succeed
from twisted.python.failure import Failure

from stompbroker.broker.features.duplicate_ids import (
    DEFAULT_WINDOW_IDS,
    DEFAULT_WINDOW_MS,
    DuplicateWindows,
)
from stompbroker.broker.features.policies import Policies
from stompbroker.broker.flow.traffic import Traffic
from stompbroker.broker.store import sqlite_records
from stompbroker.broker.store.sqlite import SQLiteStore
from stompbroker.protocol.message import Message

__all__ = ["FORGET_BATCH", "DuplicateDetection", "Route", "RoutesOnce", "window_bounds"]

#: What routes a message: ``None``, or a Deferred its RECEIPT waits for.
Route = Callable[[Message], "Deferred[None] | None"]

#: Evicted ids gathered before one lazy store write forgets them.
FORGET_BATCH = 1000


def window_bounds(policies: Policies, destination: str) -> tuple[int, float]:
    """:returns: ``destination``'s window: most ids, and seconds."""
    settings = policies.settings_for(destination)
    count, window_ms = DEFAULT_WINDOW_IDS, DEFAULT_WINDOW_MS
    if settings is not None:
        if settings.duplicate_window_ids is not None:
            count = settings.duplicate_window_ids
        if settings.duplicate_window is not None:
            window_ms = settings.duplicate_window
    return count, window_ms / 1000.0


class RoutesOnce(Protocol):
    """What routes a SEND that carries a duplicate-detection id (an engine's)."""

    def route_once(
        self, duplicate_id: str, message: Message, persistent: bool, route: Route, plain: bool
    ) -> Deferred[None] | None:
        """
        Route ``message`` unless its destination saw ``duplicate_id`` within its
        window: then it goes nowhere, and the SEND's RECEIPT is all the client gets.

        :param persistent: whether ``route`` stores it before routing it.
        :param route: what routes it (and stores it first, if ``persistent``).
        :param plain: ``route`` is the engine's own ``publish_queue`` or
            ``publish_topic`` (after ``keep`` if ``persistent``), not a scheduled
            or another kind of destination's: an engine may publish it itself.
        :returns: what ``route`` returned, or a Deferred the RECEIPT waits for,
            or ``None``.
        """


class DuplicateDetection:
    """
    :param clock: ``seconds()``.
    :param policies: the per-destination policies, for each window's bounds.
    :param store: the engine's message store, or ``None``; only the SQLite
        store keeps ids.
    :param traffic: the engine's per-destination counters, where a repeat
        counts as ``messages_duplicate``.
    """

    def __init__(
        self, clock: Any, policies: Policies, store: Any = None, traffic: Traffic | None = None
    ) -> None:
        self._clock = clock
        self._policies = policies
        self._store = store if isinstance(store, SQLiteStore) else None
        self._traffic = traffic
        self.windows = DuplicateWindows()
        self._evicted = 0
        #: Persistent messages with an id being stored -> the repeats whose
        #: RECEIPTs wait for that write.
        self._storing: dict[tuple[str, str], list[Deferred[None]]] = {}

    def dropped(self, destination: str) -> None:
        """Count a repeat that went nowhere."""
        if self._traffic is not None:
            self._traffic.of(destination).messages_duplicate += 1

    def bounds(self, destination: str) -> tuple[int, float]:
        """:returns: ``destination``'s window: most ids, and seconds."""
        return window_bounds(self._policies, destination)

    def route_once(
        self, duplicate_id: str, message: Message, persistent: bool, route: Route, plain: bool
    ) -> Deferred[None] | None:
        """
        :meth:`RoutesOnce.route_once`, in this process: a repeat of a
        persistent message still being stored waits for that write, and a
        persistent message whose store write fails leaves the window again, so
        that the client's retry is routed.
        """
        destination = message.destination
        key = (destination, duplicate_id)
        if not self.first_time(destination, duplicate_id):
            self.dropped(destination)
            followers = self._storing.get(key)
            if followers is None:
                return None
            follower: Deferred[None] = Deferred()
            followers.append(follower)
            return follower
        waiting = route(message)
        if not persistent or waiting is None:
            return waiting
        waiting_for: list[Deferred[None]] = []
        self._storing[key] = waiting_for

        def stored(result: Any) -> Any:
            if self._storing.get(key) is waiting_for:
                del self._storing[key]
            failed = isinstance(result, Failure)
            if failed:
                self.forget(destination, duplicate_id)
            for follower in waiting_for:
                if failed:
                    follower.errback(result)
                else:
                    follower.callback(None)
            return result

        waiting.addBoth(stored)
        return waiting

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
