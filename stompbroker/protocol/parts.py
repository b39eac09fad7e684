"""
What the parts of :class:`~stompbroker.protocol.session.StompSession` share of
what they need: the clock (and the timers it schedules), pausing and resuming
the session's reading, and ending the session.

Each part (``receipts``, ``timers``, ``slow_consumer``, ``subscriptions``,
``login``, ``resume.part``) is an object the session holds, and states the rest
of what it needs of the session in a ``typing.Protocol`` of its own module,
built from these, so that it can be built and tested alone with a stand-in.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from stompbroker.protocol.errors import ProtocolError
from stompbroker.protocol.states import Event, State


class Timer(Protocol):
    """A call scheduled on a :class:`Clock` (Twisted's ``IDelayedCall``)."""

    def cancel(self) -> None: ...

    def active(self) -> bool: ...


class Clock(Protocol):
    """Where a session's parts read the time and schedule calls (``IReactorTime``)."""

    def seconds(self) -> float: ...

    def callLater(
        self, delay: float, callable: Callable[..., Any], /, *args: Any, **kw: Any
    ) -> Timer: ...


class Reading(Protocol):
    """
    What a part needs to stop and restart the session's reading from its
    socket: each part pauses for reasons of its own, and the session reads
    again once no reason is left.
    """

    @property
    def _read_pauses(self) -> frozenset[str]: ...

    def _pause_reading(self, reason: str) -> None: ...

    def _resume_reading(self, reason: str) -> None: ...


class Failing(Protocol):
    """What a part needs to end the session: an ERROR, then the close."""

    @property
    def state(self) -> State: ...

    def _fail(self, error: ProtocolError, event: Event = ...) -> None: ...
