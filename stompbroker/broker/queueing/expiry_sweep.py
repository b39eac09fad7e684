"""
The expiry sweep of a worker queue: messages that expire while nobody consumes.

A :class:`~stompbroker.broker.queueing.queues.WorkerQueue` checks a message's expiry
when it reaches the head of the queue, so an expired message is never
delivered; but a queue nobody consumes from never reaches its messages.  The
sweep finds them: it is scheduled for the earliest expiry among pending
messages but at most once per ``sweep_interval``, so that a long queue of
short-lived messages costs one pass a second rather than one pass per message.

A module of its own so that the queue's module holds the state changes of a
message; a mixin of the queue (:class:`ExpirySweep`) rather than an object of
its own because an enqueue of a message with an expiry passes here, and must
not pay for a call or an attribute hop between objects: its methods and its
slots are the queue's.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Any

from stompbroker.protocol.message import Message


class ExpirySweep:
    """
    The sweep for a queue's expired messages.  Mixed into
    :class:`~stompbroker.broker.queueing.queues.WorkerQueue`, whose ``__init__`` gives
    these slots their first values.
    """

    __slots__ = ("_sweep_interval", "_sweep", "_sweep_at", "_last_sweep")

    _sweep_interval: float
    _sweep: Any
    _sweep_at: float
    _last_sweep: float
    # Of the queue.
    pending: Any
    _clock: Any
    expire: Callable[[Message], None]

    def _watch_expiry(self, expires: float) -> None:
        """Make sure a sweep runs soon after ``expires``, but not more often than allowed."""
        at = max(expires, self._last_sweep + self._sweep_interval)
        if self._sweep is not None:
            if self._sweep_at <= at:
                return
            self._sweep.cancel()
        self._sweep_at = at
        self._sweep = self._clock.callLater(max(at - self._clock.seconds(), 0.0), self.sweep)

    def _cancel_sweep(self) -> None:
        if self._sweep is not None and self._sweep.active():
            self._sweep.cancel()
        self._sweep = None

    def sweep(self) -> None:
        """
        Expire every pending message whose time has come; schedule the next sweep.

        One pass over the pending messages, which keep their order.
        """
        self._sweep = None
        now = self._last_sweep = self._clock.seconds()
        kept: deque[Message] = deque()
        expired = []
        earliest: float | None = None
        for message in self.pending:
            expires = message.expires
            if not expires:
                kept.append(message)
            elif expires <= now:
                expired.append(message)
            else:
                kept.append(message)
                if earliest is None or expires < earliest:
                    earliest = expires
        self.pending.clear()
        self.pending.extend(kept)
        for message in expired:
            self.expire(message)
        if earliest is not None:
            self._watch_expiry(earliest)
