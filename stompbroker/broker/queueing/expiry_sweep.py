"""
The expiry sweep of a worker queue: messages that expire while nobody consumes.

A :class:`~stompbroker.broker.queueing.queues.WorkerQueue` checks a message's expiry
when it reaches the head of the queue, so an expired message is never
delivered; but a queue nobody consumes from never reaches its messages.  The
sweep finds them: it is scheduled for the earliest expiry among pending
messages but at most once per ``sweep_interval``, so that a long queue of
short-lived messages costs one pass a second rather than one pass per message.

An object the queue holds (:class:`ExpirySweep`), built with what it needs
from the queue: its clock, its pending messages and its ``expire``.  Only an
enqueue of a message with an expiry calls it (one method call more than when
it was a mixin of the queue); a message without one never reaches it.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Any

from stompbroker.protocol.message import Message


class SweepTimes:
    """
    When a sweep runs next: soon after the earliest expiry it is told of, but at
    most once per ``interval``; shared by the memory sweep and the paged one
    (:mod:`~stompbroker.broker.queueing.paged_expiry`).

    :param clock: ``seconds()`` and ``callLater()``.
    :param run: the sweep.
    :param interval: least time in seconds between two sweeps.
    """

    __slots__ = ("_clock", "_run", "interval", "_call", "_at", "last")

    def __init__(self, clock: Any, run: Callable[[], None], interval: float) -> None:
        self._clock = clock
        self._run = run
        self.interval = interval
        self._call: Any = None
        self._at = 0.0
        #: When the last sweep started.
        self.last = float("-inf")

    def watch(self, expires: float) -> None:
        """Make sure a sweep runs soon after ``expires``, but not more often than allowed."""
        at = max(expires, self.last + self.interval)
        if self._call is not None:
            if self._at <= at:
                return
            self._call.cancel()
        self._at = at
        self._call = self._clock.callLater(max(at - self._clock.seconds(), 0.0), self._run)

    def again(self) -> None:
        """Run the sweep again in the next reactor turn (a batch came full)."""
        self.cancel()
        self._at = self._clock.seconds()
        self._call = self._clock.callLater(0, self._run)

    def cancel(self) -> None:
        """Stop the next sweep (the queue is closed)."""
        if self._call is not None and self._call.active():
            self._call.cancel()
        self._call = None

    def started(self) -> float:
        """A sweep starts now; :returns: the time."""
        self._call = None
        now: float = self._clock.seconds()
        self.last = now
        return now


class ExpirySweep:
    """
    The sweep for one queue's expired messages.

    :param clock: ``seconds()`` and ``callLater()``.
    :param pending: returns the queue's pending messages now (the queue may
        replace its container, by priority or group).
    :param expire: the queue's ``expire``, for each message whose time has come.
    :param interval: least time in seconds between two sweeps.

    :ivar watch: :meth:`SweepTimes.watch`, bound (no hop on an enqueue).
    :ivar cancel: :meth:`SweepTimes.cancel`.
    """

    __slots__ = ("_pending", "_expire", "_times", "watch", "cancel")

    def __init__(
        self,
        clock: Any,
        pending: Callable[[], Any],
        expire: Callable[[Message], None],
        interval: float = 1.0,
    ) -> None:
        self._pending = pending
        self._expire = expire
        self._times = SweepTimes(clock, self.sweep, interval)
        self.watch = self._times.watch
        self.cancel = self._times.cancel

    def sweep(self) -> None:
        """
        Expire every pending message whose time has come; schedule the next sweep.

        One pass over the pending messages, which keep their order.
        """
        now = self._times.started()
        pending = self._pending()
        kept: deque[Message] = deque()
        expired = []
        earliest: float | None = None
        for message in pending:
            expires = message.expires
            if not expires:
                kept.append(message)
            elif expires <= now:
                expired.append(message)
            else:
                kept.append(message)
                if earliest is None or expires < earliest:
                    earliest = expires
        pending.clear()
        pending.extend(kept)
        for message in expired:
            self._expire(message)
        if earliest is not None:
            self.watch(earliest)
