"""
Consumers behind: the credit between what a shared queue takes in and what its
consumers on this node take out, and the hold of this node's publishers of the
queue while the queue grows past it.

A node reads its publishers and serves its consumers on one loop.  Under
overload (publishers sending as fast as the node parses them) reading them
wins: Redis takes the ``XADD``\\ s as fast as they come, so the writer's bound
(:mod:`.busy`) never trips, while the node has no time left to read the queue
for its own consumers, and the backlog grows in Redis.  RabbitMQ's answer is
credit flow: a queue that cannot deliver as fast as it takes in pushes back on
its publishers.  Here each read of a queue for this node's consumers also asks
Redis for the length of its stream (``XLEN``, one more command in the read's
round trip), which counts every node's messages not yet acknowledged: the
queue's backlog, cluster-wide.  While this node reads a queue, the shortest
length seen since the reading began is its floor (a backlog that was there
before is no one's fault: it drains at the consumers' pace, and nobody is
paused for it); once the stream is longer than the floor by more than
``bound``, the queue takes in faster than its consumers take out, and every
publisher of the queue on this node is paused after its next SEND to it, until
the stream is back within ``low`` of the floor.  Publishers of other
destinations go on; publishers on nodes without consumers of the queue are not
paused by it (their loops are not the ones that starve).

A queue whose consumers here take nothing out (their windows full, or gone,
or its reads finding nothing for them) is not one whose consumers starve for
this node's loop: its hold ends ``stale`` seconds after a read last took
entries, and a read after that begins a new floor.  So a connection that
publishes to a queue and also consumes from it (whose ACKs the pause stops
reading) waits that long at most, and a queue that delivers nothing for a
reason of its own does not hold its publishers for as long as that lasts.

Pure but for the clock it is given (``seconds()``, ``callLater``): tested on
``task.Clock``.
"""

from __future__ import annotations

from typing import Any, Protocol

from attrs import define

from stompbroker.broker.engine.redis.busy import low_mark
from stompbroker.logs import logger

__all__ = ["DEFAULT_BOUND", "QueueCredit", "SenderHold", "behind_reason"]

#: Entries a queue's stream may grow past its floor while this node's consumers
#: read it, before this node's publishers of the queue are paused: about a
#: second of a flooded queue, a few MB in Redis for small messages.
DEFAULT_BOUND = 10_000
#: Seconds after a queue's last read that its hold ends by itself.
STALE = 2.0
#: Seconds between two lines of the log about holds.
LOG_EVERY = 60.0

log = logger("stompbroker.broker.engine.redis")


class SenderHold(Protocol):
    """What pauses the publisher of the message being routed (the broker's back-pressure)."""

    def hold_sender(self, reason: str) -> None:
        """Pause the sender of the message being routed until ``reason`` is released."""

    def release_held(self, reason: str) -> None:
        """Read again the publishers paused for ``reason``."""


def behind_reason(destination: str) -> str:
    """:returns: the reason a publisher of ``destination`` is paused for."""
    return f"consumers behind on {destination}"


@define
class _Reading:
    """One queue's measure while this node reads it."""

    floor: int
    #: When a read last took entries out.
    took_at: float
    #: The reason its publishers are held for, while they are.
    reason: str | None = None
    #: The check that ends a hold once reads stop.
    check: Any = None


class QueueCredit:
    """
    Which queues take in faster than this node's consumers take out, and the
    hold of their publishers here.

    :param clock: ``seconds()`` and ``callLater``: the reactor or a ``task.Clock``.
    :param bound: entries a stream may grow past its floor before its publishers are paused.
    :param low: entries past the floor under which they are read again
        (half ``bound`` by default, so that a steady overload does not pause and
        resume on each read).
    :param stale: seconds after a read of the queue last took entries that its hold ends.
    :raises ValueError: for a ``bound`` that is not positive, or a ``low`` not under it.

    :ivar count: holds so far.
    """

    __slots__ = (
        "bound",
        "low",
        "stale",
        "count",
        "behind",
        "_clock",
        "_holds",
        "_readings",
        "_logged_at",
    )

    def __init__(
        self, clock: Any, bound: int = DEFAULT_BOUND, low: int | None = None, stale: float = STALE
    ) -> None:
        self.low = low_mark("the queue credit", bound, low)
        self.bound = bound
        self.stale = stale
        self.count = 0
        self._clock = clock
        self._holds: list[SenderHold] = []
        #: destination -> its measure, while this node reads it.
        self._readings: dict[str, _Reading] = {}
        self._logged_at: float | None = None
        #: destination -> the reason its publishers are held for, while they
        #: are: read on every SEND to a queue, empty nearly always.
        self.behind: dict[str, str] = {}

    def watch(self, hold: SenderHold) -> None:
        """Pause publishers through ``hold`` while their queue's consumers are behind."""
        self._holds.append(hold)

    def sent(self, destination: str) -> None:
        """A SEND to ``destination`` was routed here: hold its sender while the queue is behind."""
        reason = self.behind.get(destination)
        if reason is not None:
            for hold in self._holds:
                hold.hold_sender(reason)

    def measured(self, destination: str, length: int, taken: int) -> None:
        """
        A read of ``destination`` for this node's consumers took ``taken``
        entries and found its stream ``length`` entries long: hold its
        publishers past the bound, release them within the low mark.
        """
        now = self._clock.seconds()
        reading = self._readings.get(destination)
        if reading is None:
            self._readings[destination] = _Reading(length, now)
            return
        if taken:
            reading.took_at = now
        if length < reading.floor:
            reading.floor = length
        over = length - reading.floor
        if reading.reason is None:
            if over > self.bound:
                self._hold(destination, reading, length)
        elif over <= self.low:
            self._release(destination, reading)

    def ended(self, destination: str) -> None:
        """This node reads ``destination`` no more: its floor is forgotten, its publishers read."""
        reading = self._readings.pop(destination, None)
        if reading is not None and reading.reason is not None:
            self._release(destination, reading)

    def _hold(self, destination: str, reading: _Reading, length: int) -> None:
        reading.reason = self.behind[destination] = behind_reason(destination)
        self.count += 1
        reading.check = self._clock.callLater(self.stale, self._check, destination)
        now = self._clock.seconds()
        if self._logged_at is None or now - self._logged_at >= LOG_EVERY:
            log.warn(
                "{destination} takes in faster than its consumers here take out ({length}"
                " entries, {over} more than its floor): pausing its publishers here until"
                " they catch up ({count} such pauses in all)",
                destination=destination,
                length=length,
                over=length - reading.floor,
                count=self.count,
            )
            self._logged_at = now

    def _release(self, destination: str, reading: _Reading) -> None:
        reason = reading.reason
        reading.reason = None
        self.behind.pop(destination, None)
        check = reading.check
        reading.check = None
        if check is not None and check.active():
            check.cancel()
        if reason is not None:
            for hold in self._holds:
                hold.release_held(reason)

    def _check(self, destination: str) -> None:
        """End a hold whose reads took nothing for :attr:`stale` seconds; else look again then."""
        reading = self._readings.get(destination)
        if reading is None or reading.reason is None:
            return
        reading.check = None
        due = reading.took_at + self.stale
        if self._clock.seconds() >= due:
            # Nothing taken out: its consumers are full or gone, not starved.  A
            # read after this begins a new floor: what grew meanwhile waited
            # for them, not for this node's loop.
            self._release(destination, reading)
            del self._readings[destination]
        else:
            wait = due - self._clock.seconds()
            reading.check = self._clock.callLater(wait, self._check, destination)
