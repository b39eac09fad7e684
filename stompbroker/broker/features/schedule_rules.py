"""
Scheduled delivery: a SEND held until it is due, then routed as if just sent, maybe repeatedly.

Headers (SEND), in milliseconds, as the brokers that defined them read them:

- ``AMQ_SCHEDULED_DELAY`` (ActiveMQ, Artemis): due that long after the broker
  receives it.
- ``x-delay`` (RabbitMQ's delayed-message plugin): the same.
- ``AMQ_SCHEDULED_TIME`` (Artemis): due at that time, in ms since the epoch.
- ``AMQ_SCHEDULED_PERIOD`` and ``AMQ_SCHEDULED_REPEAT`` (ActiveMQ): after the first
  delivery, deliver it ``REPEAT`` more times, ``PERIOD`` apart (so ``REPEAT:9`` is
  ten deliveries, as in ActiveMQ's documentation); ``REPEAT:-1`` repeats until
  cancelled.  A repeat needs a period above 0.
- ``AMQ_SCHEDULED_CRON`` is refused (``NotSupported``) rather than ignored: a
  client relying on it must not see its message delivered at once.

A delay or time of 0 or less means no delay.  When a SEND has several, the latest
due time counts, so no header's promise is broken (Artemis lets ``AMQ_SCHEDULED_TIME``
win over the delay; clients send one or the other).  As in ActiveMQ, a SEND that
already carries ``scheduledJobId`` is not scheduled (it is a fired message sent on).

What a fired message carries: the headers of the SEND without the scheduling
headers above (ActiveMQ removes them so that a forwarded copy is not scheduled
again; Artemis never delivers them), plus ``scheduledJobId`` with the message-id the
broker gave the SEND (ActiveMQ's convention: :func:`fired_headers`).  The first
delivery keeps that message-id; each repeat gets a new one, as in ActiveMQ, since
two deliveries of one id could not be acknowledged apart.  Expiry counts from
the firing (``expiration``, a time to live, restarts; an absolute ``expires``
stays), as ActiveMQ moves the expiry of a fired message.

How it plugs in
---------------
(:mod:`stompbroker.broker.features.schedule_timer` is the adapter, and the router's
``fire`` routes a due message.)  The router, on a SEND (at COMMIT for a
transacted one, as ActiveMQ schedules after commit), calls
:func:`parse_schedule` with the clock's time in ms; for ``None`` it routes as
now.  Otherwise it adds the message to the broker's one
:class:`Scheduler` (key: the message-id) and, for a persistent message, files it
in the store with its schedule (``due``, ``period``, ``remaining``); after a
restart it calls :meth:`Scheduler.restore` with what the store kept, so the
message is due at the same time (or at once, if that time passed while the
broker was down).  The adapter keeps one ``clock.callLater`` for
:meth:`Scheduler.next_due` (re-armed after each ``add``, ``cancel`` and firing);
when it fires, :meth:`Scheduler.due` returns the entries that are due, which the
router routes with :func:`fired_headers`, and then updates (entry still
scheduled) or deletes (``entry.finished``) their stored copies.

Periods are fixed-delay from the actual firing (the next delivery is due a period
after this one went out), as ActiveMQ's scheduler does: a broker that was down,
or late, sends one delivery and carries on, never a burst of missed ones.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterator, Mapping
from typing import Generic, TypeVar

from attrs import define, frozen

from stompbroker.protocol.errors import MalformedFrame, NotSupported
from stompbroker.protocol.frames import Headers

__all__ = [
    "DELAY_HEADERS",
    "JOB_ID_HEADER",
    "SCHEDULE_HEADERS",
    "Schedule",
    "ScheduledEntry",
    "Scheduler",
    "fired_headers",
    "parse_schedule",
]

#: Delays in ms from receipt, synonyms.
DELAY_HEADERS = ("AMQ_SCHEDULED_DELAY", "x-delay")
#: Due time in ms since the epoch (Artemis).
TIME_HEADER = "AMQ_SCHEDULED_TIME"
PERIOD_HEADER = "AMQ_SCHEDULED_PERIOD"
REPEAT_HEADER = "AMQ_SCHEDULED_REPEAT"
CRON_HEADER = "AMQ_SCHEDULED_CRON"
#: Every header that schedules; none of them reaches a consumer.
SCHEDULE_HEADERS = frozenset(
    {*DELAY_HEADERS, TIME_HEADER, PERIOD_HEADER, REPEAT_HEADER, CRON_HEADER}
)
#: Put on a fired message: the message-id of the SEND that scheduled it (ActiveMQ).
JOB_ID_HEADER = "scheduledJobId"
#: ``remaining`` of a schedule that repeats until cancelled.
FOREVER = -1

_T = TypeVar("_T")


@frozen
class Schedule:
    """
    When a message is due, and how often it comes again.

    :ivar due: the first delivery, in ms since the epoch.
    :ivar period: ms between deliveries after the first; 0 if it does not repeat.
    :ivar repeat: deliveries after the first; :data:`FOREVER` (-1) for no end.
    """

    due: int
    period: int = 0
    repeat: int = 0


def _integer(headers: Mapping[str, str], name: str) -> int | None:
    """
    :returns: the header as an integer, or ``None`` if absent.
    :raises MalformedFrame: if present and not a decimal integer.
    """
    value = headers.get(name)
    if value is None:
        return None
    digits = value[1:] if value[:1] == "-" else value
    if not (digits.isascii() and digits.isdigit()):
        raise MalformedFrame(
            f"invalid {name} header", f"{name} must be an integer number of ms, got {value!r}"
        )
    return int(value)


def parse_schedule(headers: Mapping[str, str], now_ms: int) -> Schedule | None:
    """
    Read a SEND's scheduling headers.

    :param headers: the frame's headers, first of a repeated header winning.
    :param now_ms: the broker clock's time in ms since the epoch.
    :returns: the schedule, or ``None`` for a message to route now and once.
    :raises MalformedFrame: for a value that is not an integer, a repeat below -1,
        or a repeat without a period above 0.
    :raises NotSupported: for ``AMQ_SCHEDULED_CRON``.
    """
    if CRON_HEADER in headers:
        raise NotSupported(
            f"{CRON_HEADER} is not supported",
            f"This broker schedules with {', '.join(DELAY_HEADERS)}, {TIME_HEADER},"
            f" {PERIOD_HEADER} and {REPEAT_HEADER}; cron entries are not supported.",
        )
    if JOB_ID_HEADER in headers:
        return None
    due = now_ms
    for name in DELAY_HEADERS:
        delay = _integer(headers, name)
        if delay is not None and delay > 0:
            due = max(due, now_ms + delay)
    at = _integer(headers, TIME_HEADER)
    if at is not None and at > 0:
        due = max(due, at)
    repeat = _integer(headers, REPEAT_HEADER) or 0
    period = _integer(headers, PERIOD_HEADER) or 0
    if repeat < FOREVER:
        raise MalformedFrame(
            f"invalid {REPEAT_HEADER} header",
            f"{REPEAT_HEADER} is how many more deliveries, -1 for no end; got {repeat}",
        )
    if repeat and period <= 0:
        raise MalformedFrame(
            f"{REPEAT_HEADER} without {PERIOD_HEADER}",
            f"A message repeated with {REPEAT_HEADER} needs {PERIOD_HEADER}, the ms"
            " between deliveries, above 0.",
        )
    if due == now_ms and not repeat:
        return None
    return Schedule(due, period if repeat else 0, repeat)


def fired_headers(headers: Headers, job_id: str) -> Headers:
    """
    The headers a fired message is routed with.

    :param headers: the scheduled SEND's headers.
    :param job_id: the message-id the broker gave the SEND.
    :returns: ``headers`` without the scheduling headers, plus ``scheduledJobId``.
    """
    kept = tuple(pair for pair in headers if pair[0] not in SCHEDULE_HEADERS)
    return (*kept, (JOB_ID_HEADER, job_id))


@define(eq=False)
class ScheduledEntry(Generic[_T]):
    """
    One scheduled message in the :class:`Scheduler`.

    :ivar key: unique among the scheduler's entries: the SEND's message-id.
    :ivar item: what to route when due (the message).
    :ivar due: the next delivery, in ms since the epoch.
    :ivar period: ms between deliveries.
    :ivar remaining: deliveries after the next; :data:`FOREVER` for no end.
    :ivar fired: deliveries so far (0 before the first: that one keeps the SEND's
        message-id, later ones need new ids).
    :ivar finished: set when the last delivery has fired: the store's copy goes.
    """

    key: str
    item: _T
    due: int
    period: int
    remaining: int
    fired: int = 0
    finished: bool = False
    _sequence: int = 0


class Scheduler(Generic[_T]):
    """
    Scheduled messages by due time: a heap, so each operation is O(log n).

    Sans-I/O: it never reads a clock; the caller passes the time and arms one timer
    for :meth:`next_due`.  Cancelled entries stay in the heap until they reach its
    top, or until they outnumber the live ones (then the heap is rebuilt), so
    ``cancel`` is O(1) and the heap never grows beyond twice what is scheduled.
    """

    __slots__ = ("_entries", "_heap", "_sequence")

    def __init__(self) -> None:
        self._entries: dict[str, ScheduledEntry[_T]] = {}
        self._heap: list[tuple[int, int, ScheduledEntry[_T]]] = []
        self._sequence = 0

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: object) -> bool:
        return key in self._entries

    def __iter__(self) -> Iterator[ScheduledEntry[_T]]:
        """The entries, in no particular order (for the store and statistics)."""
        return iter(list(self._entries.values()))

    def add(self, key: str, item: _T, schedule: Schedule) -> ScheduledEntry[_T]:
        """
        Schedule a message.

        :raises ValueError: if ``key`` is scheduled already.
        """
        return self.restore(key, item, schedule.due, schedule.period, schedule.repeat)

    def restore(
        self, key: str, item: _T, due: int, period: int, remaining: int, fired: int = 0
    ) -> ScheduledEntry[_T]:
        """
        Schedule a message again from what the store kept: due when it was due.

        :raises ValueError: if ``key`` is scheduled already.
        """
        if key in self._entries:
            raise ValueError(f"{key!r} is scheduled already")
        entry = ScheduledEntry(key, item, due, period, remaining, fired)
        self._entries[key] = entry
        self._push(entry)
        return entry

    def cancel(self, key: str) -> ScheduledEntry[_T] | None:
        """
        Unschedule a message (its destination was deleted, or an admin removed it).

        :returns: the entry, or ``None`` if ``key`` was not scheduled.
        """
        entry = self._entries.pop(key, None)
        if entry is not None and len(self._heap) > 2 * len(self._entries) + 16:
            self._heap = [item for item in self._heap if self._live(item)]
            heapq.heapify(self._heap)
        return entry

    def next_due(self) -> int | None:
        """:returns: when the earliest entry is due (ms since the epoch), or ``None``."""
        heap = self._heap
        while heap and not self._live(heap[0]):
            heapq.heappop(heap)
        return heap[0][0] if heap else None

    def due(self, now_ms: int) -> list[ScheduledEntry[_T]]:
        """
        Fire every entry due by ``now_ms``, earliest first (ties in the order added).

        Each entry fires once per call, even if its next delivery is due already.
        A fired entry that repeats is due again a period after ``now_ms``; one that
        does not is removed and marked ``finished``.

        :returns: the fired entries, updated: route ``entry.item``, then store
            ``entry.due`` and ``entry.remaining``, or drop it if ``entry.finished``.
        """
        fired: list[ScheduledEntry[_T]] = []
        heap = self._heap
        while heap and heap[0][0] <= now_ms:
            item = heapq.heappop(heap)
            if self._live(item):
                fired.append(item[2])
        for entry in fired:
            entry.fired += 1
            if entry.remaining == 0:
                entry.finished = True
                del self._entries[entry.key]
                continue
            if entry.remaining > 0:
                entry.remaining -= 1
            entry.due = now_ms + entry.period
            self._push(entry)
        return fired

    def _push(self, entry: ScheduledEntry[_T]) -> None:
        self._sequence += 1
        entry._sequence = self._sequence
        heapq.heappush(self._heap, (entry.due, self._sequence, entry))

    def _live(self, item: tuple[int, int, ScheduledEntry[_T]]) -> bool:
        """Whether a heap item is its entry's current one and the entry is scheduled."""
        _, sequence, entry = item
        return entry._sequence == sequence and self._entries.get(entry.key) is entry
