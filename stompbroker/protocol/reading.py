"""
Why a session reads nothing from its socket now, and when it last heard from
its client.

Several parts of a session stop its reading, each for a reason of its own (the
write window is full, a backlog waits, a login is checked, frames are held):
:class:`ReadPauses` pauses the transport at the first reason and resumes it
once the last one is gone.  The heart-beat check reads the same object: while
reading is paused, the client's silence is not its fault, and once reading
resumes the silence is counted from then.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from stompbroker.protocol.parts import Clock

#: No reason: one frozenset every session shares while it reads (``frozenset()``
#: makes a new one, about 200 bytes, each time).
_NO_REASONS: frozenset[str] = frozenset()


class Pausable(Protocol):
    """The transport beneath (``ISessionTransport``'s reading side)."""

    def pause_reading(self) -> None: ...

    def resume_reading(self) -> None: ...


class ReadPauses:
    """
    The reasons a session reads nothing now, and when its client was last heard.

    :param transport: what is paused and resumed.
    :param clock: for :attr:`last_heard` on resuming.
    :param may_resume: asked before the transport resumes once no reason is
        left: ``False`` for a session that is ending (it reads nothing more).
    """

    __slots__ = ("last_heard", "reasons", "_clock", "_may_resume", "_transport")

    def __init__(self, transport: Pausable, clock: Clock, may_resume: Callable[[], bool]) -> None:
        self._transport = transport
        self._clock = clock
        self._may_resume = may_resume
        #: Why reading is paused; empty while it is not.  A frozenset, replaced
        #: on change, so that idle sessions share the empty one.
        self.reasons: frozenset[str] = _NO_REASONS
        #: When the client was last heard from (read by the heart-beat check).
        self.last_heard = clock.seconds()

    @property
    def paused(self) -> bool:
        """Whether the session reads nothing now, for any reason."""
        return bool(self.reasons)

    def heard(self, now: float) -> None:
        """The client showed life (bytes, or a WebSocket pong) at ``now``."""
        self.last_heard = now

    def pause(self, reason: str) -> None:
        """Read nothing more until :meth:`resume` with every reason given."""
        reasons = self.reasons
        if reason in reasons:
            return
        if not reasons:
            self._transport.pause_reading()
        self.reasons = reasons | {reason}

    def resume(self, reason: str) -> None:
        """``reason`` is gone: read again if no other is left and the session may."""
        if reason not in self.reasons:
            return
        self.reasons = self.reasons - {reason} or _NO_REASONS
        if self.reasons or not self._may_resume():
            return
        # Silence while the session did not read is not the client's.
        self.last_heard = self._clock.seconds()
        self._transport.resume_reading()
