"""
Redis away: since when, and how long the node holds what waits for it
(``--engine-outage-hold``).

While the hold lasts, nothing is refused: publishers are paused by
back-pressure (the broker stops reading them, as for the memory alarm: the
reason :data:`OUTAGE`), their receipts and the receipts of acknowledgements
wait, and the writes stay queued in the writer, to be sent once Redis is back.
When the hold runs out with Redis still away, whoever waits is told
(:meth:`Outage.on_expiry`: the writer fails its waiters), publishers are read
again, and what they send gets an ERROR that says for how long Redis has been
unreachable (:func:`unreachable_text`).

Pure but for the clock it is given (``callLater``, ``seconds``): tested on ``task.Clock``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from stompbroker.protocol.errors import ProtocolError

__all__ = [
    "DEFAULT_OUTAGE_HOLD",
    "OUTAGE",
    "Outage",
    "PublisherAlarm",
    "RedisUnreachable",
    "unreachable_text",
]

#: Seconds a node holds publishers and receipts while Redis is away: longer
#: than a Redis restart (about a second with a small AOF) or a Sentinel
#: failover (``down-after-milliseconds`` 5 s plus the election, by default).
DEFAULT_OUTAGE_HOLD = 30.0
#: The reason publishers are paused for while Redis is away.
OUTAGE = "redis unreachable"


class PublisherAlarm(Protocol):
    """What pauses publishers (the broker's back-pressure): an alarm per reason."""

    def alarm_on(self, reason: str, loud: bool = True) -> None:
        """Pause every publisher after its next SEND, until it is off (logged if ``loud``)."""

    def alarm_off(self, reason: str) -> None:
        """Read again the publishers paused for ``reason``."""


def unreachable_text(lasted: float) -> str:
    """:returns: what a client is told once Redis has been away past the hold."""
    return (
        f"the broker's Redis server has been unreachable for {lasted:.0f} s (longer than"
        " --engine-outage-hold); the broker is reconnecting: send again later"
    )


class Outage:
    """
    Whether Redis is away, since when, and the hold.

    :param clock: ``seconds()`` and ``callLater()``: the reactor or a ``task.Clock``.
    :param hold: seconds to hold publishers and receipts; 0 refuses at once.
    :raises ValueError: for a negative hold.

    :ivar since: when the outage began (clock seconds), or ``None`` while Redis is there.
    :ivar expired: the hold of this outage has run out.
    :ivar count: outages so far.
    """

    def __init__(self, clock: Any, hold: float = DEFAULT_OUTAGE_HOLD) -> None:
        if hold < 0:
            raise ValueError(f"--engine-outage-hold must be 0 or more seconds, got {hold}")
        self.hold = hold
        self.since: float | None = None
        self.expired = False
        self.count = 0
        self._clock = clock
        self._timer: Any = None
        self._alarms: list[PublisherAlarm] = []
        self._expiry: list[Callable[[float], None]] = []

    def watch(self, alarm: PublisherAlarm) -> None:
        """Pause publishers through ``alarm`` during each outage's hold."""
        self._alarms.append(alarm)

    def on_expiry(self, callback: Callable[[float], None]) -> None:
        """Call ``callback(seconds away)`` when a hold runs out with Redis still away."""
        self._expiry.append(callback)

    @property
    def away(self) -> bool:
        """Whether Redis is away now."""
        return self.since is not None

    def lasted(self) -> float:
        """:returns: seconds since the outage began (0 while Redis is there)."""
        return 0.0 if self.since is None else self._clock.seconds() - self.since

    def began(self) -> None:
        """Redis is away (a write or read failed): hold, unless an outage is on already."""
        if self.since is not None:
            return
        self.since = self._clock.seconds()
        self.count += 1
        if self.hold <= 0:
            self._expire()
            return
        self._timer = self._clock.callLater(self.hold, self._expire)
        for alarm in self._alarms:
            alarm.alarm_on(OUTAGE)

    def ended(self) -> None:
        """Redis is back: publishers go on (what they wait for is being sent)."""
        if self.since is None:
            return
        if self._timer is not None and self._timer.active():
            self._timer.cancel()
        self._timer = None
        if not self.expired:
            for alarm in self._alarms:
                alarm.alarm_off(OUTAGE)
        self.since = None
        self.expired = False

    def _expire(self) -> None:
        self._timer = None
        self.expired = True
        if self.hold > 0:
            for alarm in self._alarms:
                alarm.alarm_off(OUTAGE)
        lasted = self.lasted()
        for callback in self._expiry:
            callback(lasted)


class RedisUnreachable(ProtocolError):
    """
    A frame needs the Redis server, and it is away: the client gets an ERROR
    (the node reconnects by itself; the client may try again).
    """
