"""
What the parts of :class:`~stompbroker.protocol.session.StompSession` are given:
the clock (and the timers it schedules), the session's state to read, the
session's reading to pause and resume, and a way to end the session.

Each part (``receipts``, ``timers``, ``slow_consumer``, ``subscriptions``,
``login``, ``resume.part``) is an object the session holds and is given, when
made, only what it uses: values, callables, and these interfaces of one or
two members.  None of them knows the session, so each is built and tested
alone with the real objects these name (a ``task.Clock``, a
:class:`~stompbroker.protocol.states.SessionState`, a
:class:`~stompbroker.protocol.reading.ReadPauses`).
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


class Credentials(Protocol):
    """
    What a connection tells of the client's credentials below STOMP
    (:class:`~stompbroker.transport.peer_credentials.PeerCredentials`).
    """

    @property
    def bearer_token(self) -> str | None: ...

    def peer_certificate(self) -> Any: ...


class StateView(Protocol):
    """Where the session is in its life, for a part to read (a ``SessionState``)."""

    @property
    def state(self) -> State: ...


class Reading(Protocol):
    """
    The session's reading from its socket, which a part pauses for reasons of
    its own; the session reads again once no reason is left (a ``ReadPauses``).
    """

    def pause(self, reason: str) -> None: ...

    def resume(self, reason: str) -> None: ...


class Identified(Protocol):
    """Who the client logged in as (the session's ``Login``)."""

    @property
    def identity(self) -> Any: ...


class Failing(Protocol):
    """Ends the session: an ERROR, then the close (the session's ``fail``)."""

    def __call__(self, error: ProtocolError, event: Event = ..., /) -> None: ...
