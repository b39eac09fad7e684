"""
The expiry sweep of a paged queue's part on disk: messages that expire while they wait in the store.

A message a queue has paged out (:mod:`~stompbroker.broker.queueing.paging`) is in
the store only, so the queue's memory sweep
(:mod:`~stompbroker.broker.queueing.expiry_sweep`) never meets it; its page would
expire it when read, but a queue nobody consumes from reads no page, and its
depth would count the expired messages for ever.  As ActiveMQ expires what its
store holds on a period, :class:`PagedExpiry` asks the store for the part's
expired messages (``IMessageStore.expired``: a range of an index on
``(queue, expires)``, read in the store's thread), the oldest first, in batches of
at most ``batch``, and hands each to the queue's ``expire``, which drops it or
dead-letters it as it does any expired message: the store removes or moves it,
in order, in the writer's group commits.

It runs at the earliest expiry it knows of among the part's messages (those
paged out, and what the store said of the rest), but at most once per
``interval``; a batch that comes full is followed by the next at once (in a
later reactor turn).  Only one read of a part is in flight at a time (a page, a
sweep): the part's ``reading`` flag says so, and a sweep that finds it set tries
again after ``interval``.

An object the queue holds, given what it uses: the clock, the part (a callable:
the queue replaces it, or drops it in a purge), the store's read, what memory
holds (a message of a priority above the part's stays in memory, though stored
past where the part starts), the queue's ``expire``, and what to do after a
sweep (the queue's dispatch, which ends paging when the part is empty).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from twisted.internet.defer import Deferred

from stompbroker.broker.queueing.expiry_sweep import SweepTimes
from stompbroker.broker.queueing.paging import PagedPart, message_from_record
from stompbroker.broker.store.base import StoreNotOpen
from stompbroker.logs import logger
from stompbroker.protocol.message import Message

__all__ = ["SWEEP_BATCH", "PagedExpiry"]

log = logger("stompbroker.broker")

#: Most expired messages one sweep of a part reads and expires in one reactor turn.
SWEEP_BATCH = 250

#: ``(after, first_id, now, limit) -> Deferred[ExpiredPage]``: the store's
#: ``expired`` for the queue's key.
ReadExpired = Callable[[int, str | None, float, int], Deferred[Any]]


class PagedExpiry:
    """
    The sweep for one queue's expired messages on disk.

    :param clock: ``seconds()`` and ``callLater()``.
    :param part: returns the queue's :class:`PagedPart` now, or ``None``.
    :param read: the store's ``expired`` for the queue's key (:data:`ReadExpired`).
    :param held: returns the messages the queue holds in memory now, which
        expire there, not here.
    :param expire: the queue's ``expire``, for each message whose time has come.
    :param swept: called after a sweep expired messages (the queue's dispatch).
    :param interval: least time in seconds between two sweeps.
    :param batch: most messages one sweep expires.
    """

    __slots__ = (
        "_part",
        "_read",
        "_held",
        "_forget",
        "_expire",
        "_swept",
        "_batch",
        "_times",
        "watch",
        "cancel",
    )

    def __init__(
        self,
        clock: Any,
        part: Callable[[], PagedPart | None],
        read: ReadExpired,
        held: Callable[[], Iterable[Message]],
        expire: Callable[[Message], None],
        swept: Callable[[], None],
        forget: Callable[[str], object],
        interval: float = 1.0,
        batch: int = SWEEP_BATCH,
    ) -> None:
        self._part = part
        self._read = read
        self._held = held
        self._expire = expire
        self._forget = forget
        self._swept = swept
        self._batch = batch
        self._times = SweepTimes(clock, self.sweep, interval)
        #: :meth:`SweepTimes.watch`: a sweep soon after an expiry.
        self.watch = self._times.watch
        #: :meth:`SweepTimes.cancel`: no more sweeps (the queue is closed).
        self.cancel = self._times.cancel

    def sweep(self) -> None:
        """Ask the store for the part's oldest expired messages, unless it is being read."""
        now = self._times.started()
        paged = self._part()
        if paged is None:
            return
        if paged.reading:
            self.watch(now)
            return
        paged.reading = True
        found = self._read(paged.after, paged.first_id, now, self._batch)
        found.addCallbacks(self._came, self._failed, callbackArgs=(paged,), errbackArgs=(paged,))

    def _came(self, page: Any, paged: PagedPart) -> None:
        """
        Expire what the store found, in order, unless the part has gone meanwhile
        (a purge forgets it, and removes its messages from the store itself).
        """
        if self._part() is not paged:
            return
        paged.reading = False
        records = list(page.records)
        if records:
            # What memory holds expires there: those of a priority above the
            # part that stayed in memory.
            held = {message.message_id for message in self._held()}
            records = [record for record in records if record.message_id not in held]
        paged.taken(records, page.start)
        for record in records:
            if record.transient:
                # Expiring a non-persistent message forgets nothing stored: its row goes here.
                self._forget(record.message_id)
            self._expire(message_from_record(record))
        if len(page.records) >= self._batch and records:
            self._times.again()
        elif len(page.records) >= self._batch:
            self.watch(self._times.last)
        elif page.next_expiry:
            self.watch(page.next_expiry)
        if records:
            log.debug(
                "{count} paged messages of {destination} expired",
                count=len(records),
                destination=records[0].queue,
            )
            self._swept()

    def _failed(self, failure: Any, paged: PagedPart) -> None:
        if self._part() is not paged:
            return
        paged.reading = False
        if failure.check(StoreNotOpen):
            # The store closes with the broker: nothing to sweep any more.
            return
        log.warn(
            "the expiry sweep of a paged queue could not read the store: {error};"
            " sweeping again in {retry} s",
            error=str(failure.value),
            retry=self._times.interval,
        )
        self.watch(self._times.last)
