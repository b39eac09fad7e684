"""
Redis busy: the bound on what a node's writer holds for a Redis that answers
slowly, and the alarm that holds publishers while it is over.

A node reads its publishers as fast as it can parse them, and a queue SEND
without a receipt to wait for (a non-persistent one) costs the node nothing
but a command queued in its writer.  When Redis takes longer to apply a
pipeline than the publishers take to fill the next one, the commands waiting
for the pipeline in flight pile up in the node's memory.  That is load, not an
outage: the node answers it as the memory alarm does, by no longer reading its
publishers (the reason :data:`BUSY`) while the writer holds more than
``high`` bytes (the commands waiting and the pipeline in flight), and reads
them again once it holds less than ``low``.  Nobody gets an ERROR: Redis
answers, only slowly.

Under steady overload the alarm comes and goes with each pipeline, so it is
not logged each time: a line at the first pause, then at most one a minute
with how many pauses there were.

Pure but for the clock it is given (``seconds()``): tested on ``task.Clock``.
"""

from __future__ import annotations

from typing import Any

from stompbroker.broker.engine.redis.outage import PublisherAlarm
from stompbroker.logs import logger
from stompbroker.protocol.errors import ProtocolError

__all__ = ["BUSY", "DEFAULT_HIGH", "FULL_TEXT", "Busy", "RedisFull", "low_mark"]

#: The reason publishers are paused for while Redis is busy.
BUSY = "redis busy"
#: Bytes the writer may hold before publishers are paused: a few pipelines of
#: a busy node (about 30 000 small queue messages), far under ``--memory-high``.
DEFAULT_HIGH = 8 * 1024 * 1024
#: What a publisher is told while Redis is full.
FULL_TEXT = (
    "the broker's Redis server is full (its maxmemory, with maxmemory-policy noeviction):"
    " the message was not stored; send again once consumers have drained the queues"
)
#: Seconds between two lines of the log about pauses.
LOG_EVERY = 60.0

log = logger("stompbroker.broker.engine.redis")


def low_mark(what: str, high: int, low: int | None) -> int:
    """
    :returns: the mark under which what a high mark paused goes on: ``low``, or
        half ``high`` by default, so that a steady load does not pause and
        resume at each step.
    :raises ValueError: for a ``high`` that is not positive, or a ``low`` not under it.
    """
    if high <= 0:
        raise ValueError(f"{what} must be positive, got {high}")
    low = high // 2 if low is None else low
    if not 0 <= low < high:
        raise ValueError(f"the low mark must be 0 or more and under {high}, got {low}")
    return low


class Busy:
    """
    Whether the writer holds too much for Redis, and the alarm while it does.

    :param clock: ``seconds()``: the reactor or a ``task.Clock``.
    :param high: bytes over which publishers are paused.
    :param low: bytes under which they are read again (half ``high`` by default,
        so that a node under steady overload does not pause and resume on each pipeline).
    :raises ValueError: for a ``high`` that is not positive, or a ``low`` not under it.

    :ivar on: publishers are paused now.
    :ivar count: times publishers were paused so far.
    """

    __slots__ = ("high", "low", "on", "count", "_alarms", "_clock", "_logged_at", "_logged")

    def __init__(self, clock: Any, high: int = DEFAULT_HIGH, low: int | None = None) -> None:
        self.low = low_mark("the writer's bound", high, low)
        self.high = high
        self.on = False
        self.count = 0
        self._alarms: list[PublisherAlarm] = []
        self._clock = clock
        self._logged_at: float | None = None
        #: :attr:`count` when the log last said so.
        self._logged = 0

    def watch(self, alarm: PublisherAlarm) -> None:
        """Pause publishers through ``alarm`` while the writer holds too much."""
        self._alarms.append(alarm)

    def held(self, size: int) -> None:
        """
        The writer holds ``size`` bytes now: pause publishers above the high
        mark, read them again under the low one.
        """
        if self.on:
            if size < self.low:
                self.on = False
                for alarm in self._alarms:
                    alarm.alarm_off(BUSY)
        elif size > self.high:
            self.on = True
            self.count += 1
            self._say(size)
            for alarm in self._alarms:
                alarm.alarm_on(BUSY, loud=False)

    def _say(self, size: int) -> None:
        now = self._clock.seconds()
        if self._logged_at is not None and now - self._logged_at < LOG_EVERY:
            return
        log.warn(
            "Redis lags behind the publishers ({size} bytes wait for it): pausing them until"
            " it catches up ({count} pauses since the last such line)",
            size=size,
            count=self.count - self._logged,
        )
        self._logged_at = now
        self._logged = self.count


class RedisFull(ProtocolError):
    """
    Redis refuses writes as full (``OOM``: ``maxmemory`` reached, with
    ``maxmemory-policy noeviction``): a SEND gets an ERROR rather than be
    accepted and lost.  Unlike a slow Redis, a full one does not catch up by
    itself: only consumers make room, so holding publishers could hold them forever.
    """
