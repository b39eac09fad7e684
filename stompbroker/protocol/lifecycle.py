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

A module of its own so that :mod:`~stompbroker.protocol.session` holds the
state machine alone.  A mixin of
:class:`~stompbroker.protocol.session.StompSession`, as its other parts are:
its state is slots of the session (:attr:`LifecycleMixin.SLOTS`), and every
part fails and closes through it without a hop between objects.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from stompbroker.protocol.encoder import error_frame
from stompbroker.protocol.errors import ProtocolError, ShuttingDown, VersionMismatch
from stompbroker.protocol.frames import Frame
from stompbroker.protocol.parts import SessionPart
from stompbroker.protocol.states import Event, State


class LifecycleMixin(SessionPart):
    """
    The session's opening and ending.  Mixed into
    :class:`~stompbroker.protocol.session.StompSession`, whose slots hold its
    state (:data:`SLOTS`).
    """

    __slots__ = ()

    #: The session's slots this part owns.
    SLOTS: tuple[str, ...] = ("error", "_on_closed", "_registered")

    error: ProtocolError | None
    _on_closed: Callable[[Any], None] | None
    _registered: bool
    # Of the session's other parts.
    _login: Any
    _stop_expiry: Callable[[], None]

    def _init_lifecycle(self) -> None:
        #: The error that ended the session, if one did; adapters log it.
        self.error = None
        #: Whether the broker has admitted the connection and not yet let it go.
        self._registered = False
        #: Called with this session once its connection is gone (graceful stop).
        self._on_closed = None

    # -- the transport's side ------------------------------------------------

    def connection_made(self) -> None:
        """
        The connection is open: ask the broker to admit it.

        A broker that is full answers with an ERROR and the connection closes.
        """
        try:
            self.broker.open_connection(self)
        except ProtocolError as error:
            self._fail(error)
            return
        self._registered = True
        self.timers.start_connect_timer()

    def fail(self, error: ProtocolError) -> None:
        """
        End the session with an ERROR, for a fault the transport found itself
        (a WebSocket message over the size limit, say).

        :param error: what to tell the client.
        """
        if self.state is State.CLOSING or self.state is State.CLOSED:
            return
        self._fail(error)

    def connection_lost(self) -> None:
        """
        The connection is gone, for whatever reason: let go of everything it
        held, or keep it for the client's return if it asked for that.
        """
        if self.state is State.CONNECTED:
            self.resume.detach()
        self._transition(Event.CONNECTION_LOST)
        self._release()
        self.output.forget()
        on_closed, self._on_closed = self._on_closed, None
        if on_closed is not None:
            on_closed(self)

    def shut_down(self, on_closed: Callable[[Any], None]) -> None:
        """
        The broker is stopping: tell the client with an ERROR, then close.

        :param on_closed: called with this session once the connection is gone,
            after what was written to it has been flushed.
        """
        self._on_closed = on_closed
        self.resume.leave()
        self.fail(
            ShuttingDown("broker shutting down", "the broker is stopping; connect again later")
        )

    # -- ending ------------------------------------------------------------------

    def _fail(self, error: ProtocolError, event: Event = Event.ERROR) -> None:
        """Tell the client what went wrong, then close (STOMP 1.2, "ERROR")."""
        self.error = error
        extra: tuple[tuple[str, str], ...] = ()
        if isinstance(error, VersionMismatch):
            extra = (("version", ",".join(self.config.versions)),)
        frame = error_frame(error.message, error.detail, error.receipt_id, extra)
        try:
            self.send_frame(frame)
        except ValueError:
            # The client's receipt id cannot be written in a 1.0 frame: send without it.
            self.send_frame(error_frame(error.message, error.detail, None, extra))
        self._close(event)

    def _close(self, event: Event) -> None:
        self._transition(event)
        self.receipts.drop_held()
        self._release()
        self.output.flush()
        self._transport.close()

    def _release(self) -> None:
        """Drop subscriptions, timers and the broker's record of us; safe to repeat."""
        self.timers.stop()
        self.output.stop()
        login, self._login = self._login, None
        if login is not None:
            login.cancel()
        self._stop_expiry()
        self.resume.end()
        self.subscriptions.drop_all()
        if self._registered:
            self._registered = False
            self.broker.close_connection(self)

    # -- DISCONNECT --------------------------------------------------------------

    def _on_disconnect(self, frame: Frame) -> None:
        # STOMP 1.2, "DISCONNECT": once every earlier receipt is out, its own goes
        # out, then the connection closes once the transport has flushed it.
        if not self.receipts.after_replies(frame):
            self.receipts.receipt(frame)
            self._close(Event.DISCONNECT)
