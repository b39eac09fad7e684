"""
Scheduled delivery wired in: the broker's one timer for its scheduled messages,
their copies in the message store, and firing them through the router.

The rules (which headers, what a fired message carries) are
:mod:`stompbroker.broker.features.schedule_rules`; this module is what runs them.
:class:`Scheduling` keeps the :class:`~stompbroker.broker.features.schedule_rules.Scheduler` of
the engine, and one ``callLater`` on the broker's clock for its earliest entry,
re-armed after each change.  When it fires, each due message is handed to the
router's ``fire`` (which routes it as if just sent, see
:meth:`stompbroker.broker.routing.router.Router.fire`), and its stored copy is updated
(a repeat) or forgotten (the last delivery).

Times are ms since the epoch on the broker's clock, which is the reactor's
wall clock in a running broker: a persistent scheduled message is due at the
same wall time after a restart, or at once if that time passed while the
broker was down (one delivery, not a burst of missed repeats).  Recovery puts
them back in the scheduler (:mod:`stompbroker.broker.store.recovery`); the broker then
calls :meth:`Scheduling.arm`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from twisted.internet.defer import Deferred

from stompbroker.broker.features.schedule_rules import Schedule, ScheduledEntry, Scheduler
from stompbroker.broker.store.base import ScheduledRecord
from stompbroker.logs import logger
from stompbroker.protocol.errors import ProtocolError
from stompbroker.protocol.message import Message

__all__ = ["Scheduling"]

log = logger("stompbroker.broker")


def _record(entry: ScheduledEntry[Message]) -> ScheduledRecord:
    """:returns: what the store keeps of a scheduled message."""
    message = entry.item
    return ScheduledRecord(
        entry.key,
        message.destination,
        message.headers,
        message.body,
        entry.due,
        entry.period,
        entry.remaining,
        entry.fired,
    )


class Scheduling:
    """
    The scheduled messages of one broker, on its clock.

    :param clock: ``seconds()`` and ``callLater``, the broker's ``IReactorTime``.
    :param scheduler: the engine's
        :class:`~stompbroker.broker.features.schedule_rules.Scheduler`.
    :param journal: the engine's :class:`~stompbroker.broker.store.journal.Journal`,
        or ``None`` if nothing keeps persistent messages.
    :param fire: routes one due entry (the router's ``fire``); a
        :class:`~stompbroker.protocol.errors.ProtocolError` it raises is logged.
    """

    __slots__ = ("_clock", "_scheduler", "_journal", "_fire", "_timer", "_timer_due")

    def __init__(
        self,
        clock: Any,
        scheduler: Scheduler[Message],
        journal: Any,
        fire: Callable[[ScheduledEntry[Message]], None],
    ) -> None:
        self._clock = clock
        self._scheduler = scheduler
        self._journal = journal
        self._fire = fire
        self._timer: Any = None
        self._timer_due = 0

    def __len__(self) -> int:
        return len(self._scheduler)

    def now_ms(self) -> int:
        """:returns: the clock's time in ms since the epoch."""
        return int(self._clock.seconds() * 1000)

    def add(self, message: Message, schedule: Schedule) -> Deferred[None] | None:
        """
        Hold a message until it is due.

        :returns: for a persistent message with a store, the Deferred of its
            filing, which the SEND's RECEIPT waits on; otherwise ``None``.
        """
        entry = self._scheduler.add(message.message_id, message, schedule)
        waiting = None
        if message.persistent and self._journal is not None:
            waiting = self._journal.schedule(_record(entry), message)
        self.arm()
        return waiting

    def arm(self) -> None:
        """Set the one timer for the earliest entry, if it is not set for it already."""
        due = self._scheduler.next_due()
        timer = self._timer
        if timer is not None:
            if due == self._timer_due and timer.active():
                return
            if timer.active():
                timer.cancel()
            self._timer = None
        if due is None:
            return
        self._timer_due = due
        delay = max(0.0, (due - self.now_ms()) / 1000.0)
        self._timer = self._clock.callLater(delay, self._fire_due)

    def stop(self) -> None:
        """Cancel the timer: the broker is stopping (the store keeps what is persistent)."""
        timer, self._timer = self._timer, None
        if timer is not None and timer.active():
            timer.cancel()

    def _fire_due(self) -> None:
        """The timer went off: route what is due, update the store, re-arm."""
        # The timer was set for _timer_due: that much is due, whatever the float rounding.
        self._timer = None
        now = max(self.now_ms(), self._timer_due)
        journal = self._journal
        for entry in self._scheduler.due(now):
            try:
                self._fire(entry)
            except ProtocolError as error:
                log.warn(
                    "scheduled message {message_id} to {destination} not delivered: {error}",
                    message_id=entry.key,
                    destination=entry.item.destination,
                    error=error.message,
                )
            if entry.item.persistent and journal is not None:
                if entry.finished:
                    journal.unschedule(entry.key)
                else:
                    journal.reschedule(_record(entry))
        self.arm()
