"""
How a session begins and ends: admitted by the broker when its connection
opens; ended by an ERROR, a DISCONNECT, the broker's shutdown or the loss of
the connection; and what it lets go of then.

A session that ends itself (an ERROR, a DISCONNECT's RECEIPT) moves to CLOSING,
lets go of what it holds, flushes its backlog and asks the transport to close;
the transport's report that the connection is gone then moves it to CLOSED.  A
connection lost while connected detaches a resumable session first, so that
the client may take it up again (:mod:`~stompbroker.protocol.resume.part`).
Letting go is safe to repeat: both ways pass through it.

Functions of the session (its ``connection_made``, ``connection_lost``,
``shut_down``, ``_fail`` and ``_close`` call them, and its ``HANDLERS`` name
:func:`on_disconnect`), in a module of their own so that
:mod:`~stompbroker.protocol.session` holds the state machine alone.  Ending
reaches every part of the session through the part's own method
(``stop``, ``end``, ``drop_all``...), never its state.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from stompbroker.protocol.encoder import error_frame
from stompbroker.protocol.errors import ProtocolError, ShuttingDown, VersionMismatch
from stompbroker.protocol.frames import Frame
from stompbroker.protocol.states import Event, State

if TYPE_CHECKING:
    from stompbroker.protocol.session import StompSession


def admit(session: StompSession) -> None:
    """
    The connection is open: ask the broker to admit it.

    A broker that is full answers with an ERROR and the connection closes.
    """
    try:
        session.broker.open_connection(session)
    except ProtocolError as error:
        fail(session, error)
        return
    session._registered = True
    session.timers.start_connect_timer()


def lose(session: StompSession) -> None:
    """
    The connection is gone, for whatever reason: let go of everything it
    held, or keep it for the client's return if it asked for that.
    """
    if session.state is State.CONNECTED:
        session.resume.detach()
    session._transition(Event.CONNECTION_LOST)
    release(session)
    session.output.forget()
    on_closed, session._on_closed = session._on_closed, None
    if on_closed is not None:
        on_closed(session)


def shut_down(session: StompSession, on_closed: Callable[[Any], None]) -> None:
    """
    The broker is stopping: tell the client with an ERROR, then close.

    :param on_closed: called with the session once the connection is gone,
        after what was written to it has been flushed.
    """
    session._on_closed = on_closed
    session.resume.leave()
    session.fail(
        ShuttingDown("broker shutting down", "the broker is stopping; connect again later")
    )


# -- ending ------------------------------------------------------------------


def fail(session: StompSession, error: ProtocolError, event: Event = Event.ERROR) -> None:
    """Tell the client what went wrong, then close (STOMP 1.2, "ERROR")."""
    session.error = error
    extra: tuple[tuple[str, str], ...] = ()
    if isinstance(error, VersionMismatch):
        extra = (("version", ",".join(session.config.versions)),)
    frame = error_frame(error.message, error.detail, error.receipt_id, extra)
    try:
        session.send_frame(frame)
    except ValueError:
        # The client's receipt id cannot be written in a 1.0 frame: send without it.
        session.send_frame(error_frame(error.message, error.detail, None, extra))
    close(session, event)


def close(session: StompSession, event: Event) -> None:
    """End the session: let go of everything, flush, and ask the transport to close."""
    session._transition(event)
    session.receipts.drop_held()
    release(session)
    session.output.flush()
    session.transport.close()


def release(session: StompSession) -> None:
    """Drop subscriptions, timers and the broker's record of us; safe to repeat."""
    session.timers.stop()
    session.output.stop()
    session.login.stop()
    session.resume.end()
    session.subscriptions.drop_all()
    if session._registered:
        session._registered = False
        session.broker.close_connection(session)


# -- DISCONNECT --------------------------------------------------------------


def on_disconnect(session: StompSession, frame: Frame) -> None:
    """
    STOMP 1.2, "DISCONNECT": once every earlier receipt is out, its own goes
    out, then the connection closes once the transport has flushed it.
    """
    if not session.receipts.after_replies(frame):
        session.receipts.receipt(frame)
        close(session, Event.DISCONNECT)
