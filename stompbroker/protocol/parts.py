"""
The base of the session's parts: the mixins, one module each, that make up
:class:`~stompbroker.protocol.session.StompSession`.

A part keeps its state in slots of the session (it names them in its
``SLOTS``; the session's ``__slots__`` adds them all up), and may use the
session's core, which :class:`SessionPart` declares for type checkers: the
broker, the settings, the state, and the few methods through which every part
writes, fails, and pauses reading.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from stompbroker.interfaces import IBroker, ISessionTransport
from stompbroker.protocol.config import SessionConfig
from stompbroker.protocol.errors import ProtocolError
from stompbroker.protocol.frames import Frame
from stompbroker.protocol.states import Event, State

if TYPE_CHECKING:
    from stompbroker.protocol.receipts import Receipts
    from stompbroker.protocol.resume.part import Resume
    from stompbroker.protocol.slow_consumer import SlowConsumer
    from stompbroker.protocol.subscriptions import Subscriptions
    from stompbroker.protocol.timers import Timers


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


#: A part has no slots of its own.  A name rather than a literal ``()``, so that
#: type checkers do not hold a part's assignments to this empty tuple: they
#: cannot see that the session declares the slots.
_NO_SLOTS: tuple[str, ...] = ()


class SessionPart:
    """
    What every part of the session may use of its core.

    :cvar SLOTS: the slots of the session whose attributes the part owns: it
        gives them their first value (in its ``_init_...`` method), and it
        alone documents them.
    """

    __slots__ = _NO_SLOTS

    SLOTS: tuple[str, ...] = ()

    broker: IBroker
    config: SessionConfig
    receipts: Receipts
    timers: Timers
    output: SlowConsumer
    subscriptions: Subscriptions
    resume: Resume
    #: Whether anything was written since the last heart-beat check.
    _wrote: bool
    state: State
    peer: str
    _clock: Clock
    _transport: ISessionTransport
    #: Why reading from the socket is paused (see ``_pause_reading``).
    _read_pauses: frozenset[str]
    #: Whether frames are being handled now.
    _handling: bool
    write: Callable[[bytes], None]
    send_frame: Callable[[Frame], None]
    #: ``_fail(error, event=Event.ERROR)``: send an ERROR, then close.
    _fail: Callable[..., None]
    _handle: Callable[[list[Frame]], None]
    _transition: Callable[..., None]
    _pause_reading: Callable[[str], None]
    _resume_reading: Callable[[str], None]
