"""
Delayed redeliveries: the messages of one queue that wait aside for their due time.

A NACKed message that must wait (:mod:`stompbroker.broker.queueing.backoff`)
leaves the queue's pending messages for a :class:`DelayedMessages`, so that it
blocks nothing: the queue keeps handing out the messages behind it.  When its
time comes the holder gives it back to the queue (its ``release``), which puts
it at the head of its priority level, where a redelivery goes at once; several
due together go back in the order they became due.

A queue makes its holder on the first delayed redelivery (``None`` until then),
so a queue whose consumers never NACK pays nothing.  One timer per holder, for
the earliest due time, on the queue's clock (``seconds`` and ``callLater``: a
reactor or a ``task.Clock``).
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterator
from itertools import count
from typing import Any

from stompbroker.protocol.message import Message

__all__ = ["DelayedMessages"]


class DelayedMessages:
    """
    One queue's messages waiting to be redelivered, by due time.

    :param clock: ``seconds()`` and ``callLater()``.
    :param release: called with the messages whose time has come, in due order.
    """

    __slots__ = ("_clock", "_release", "_heap", "_order", "_timer", "_timer_at")

    def __init__(self, clock: Any, release: Callable[[list[Message]], None]) -> None:
        self._clock = clock
        self._release = release
        #: ``(due, order, message)``: ``order`` keeps messages due together in the
        #: order they were held, and spares comparing messages.
        self._heap: list[tuple[float, int, Message]] = []
        self._order = count()
        self._timer: Any = None
        self._timer_at = 0.0

    def __len__(self) -> int:
        return len(self._heap)

    def __bool__(self) -> bool:
        return bool(self._heap)

    def __iter__(self) -> Iterator[Message]:
        """The messages in due order (for browsing and counting)."""
        return (entry[2] for entry in sorted(self._heap))

    def due_times(self) -> list[tuple[float, Message]]:
        """:returns: ``(due, message)`` for every message held, in due order."""
        return [(due, message) for due, _, message in sorted(self._heap)]

    def hold(self, message: Message, due: float) -> None:
        """
        Keep a message aside until ``due`` (the clock's seconds).

        :param message: the copy to redeliver, its count already raised.
        :param due: when to give it back; a time passed gives it back at the
            next turn of the clock, never from inside this call.
        """
        heapq.heappush(self._heap, (due, next(self._order), message))
        if self._timer is None or due < self._timer_at:
            self._arm(due)

    def take_all(self) -> list[Message]:
        """
        :returns: every message held, in due order; the holder is then empty and
            its timer stopped (the queue is purged, closed, or gives them away).
        """
        messages = list(self)
        self._heap.clear()
        self._disarm()
        return messages

    def _arm(self, due: float) -> None:
        self._disarm()
        self._timer_at = due
        self._timer = self._clock.callLater(max(due - self._clock.seconds(), 0.0), self._fire)

    def _disarm(self) -> None:
        if self._timer is not None and self._timer.active():
            self._timer.cancel()
        self._timer = None

    def _fire(self) -> None:
        """Give back every message whose time has come; wait for the next."""
        self._timer = None
        now = self._clock.seconds()
        heap = self._heap
        due: list[Message] = []
        while heap and heap[0][0] <= now:
            due.append(heapq.heappop(heap)[2])
        if heap:
            self._arm(heap[0][0])
        if due:
            self._release(due)
