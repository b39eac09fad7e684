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
from typing import Any

from stompbroker.protocol.config import SessionConfig
from stompbroker.protocol.frames import Frame
from stompbroker.protocol.states import State

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

    broker: Any
    config: SessionConfig
    state: State
    peer: str
    _clock: Any
    _transport: Any
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
