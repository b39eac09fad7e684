"""
Where a session is in its life, the events that move it on, and the table of
which event moves it from which state to which (:data:`TRANSITIONS`).

:class:`SessionState` holds one session's state, as h11's ``ConnectionState``
does a connection's: the session moves it (:meth:`SessionState.move`, the only
code that changes a state), and its parts are given it to read, so that each
can test the state without knowing the session.
"""

from __future__ import annotations

import enum


class State(enum.Enum):
    """Where a session is in its life."""

    #: The connection is open; the client has yet to send CONNECT (or STOMP).
    AWAITING_CONNECT = "awaiting-connect"
    #: CONNECT came; the authenticator has not answered yet.
    AUTHENTICATING = "authenticating"
    #: CONNECTED was sent: the client may send anything.
    CONNECTED = "connected"
    #: The session has ended (ERROR or DISCONNECT); the transport is flushing.
    CLOSING = "closing"
    #: The connection is gone.
    CLOSED = "closed"


class Event(enum.Enum):
    """What happens to a session that may change its state."""

    #: CONNECT came, and its login and passcode went to the authenticator.
    LOGIN_STARTED = "login-started"
    #: The client is let in (by the authenticator, or at once without one).
    LOGIN_ACCEPTED = "login-accepted"
    #: The authenticator refused the client; it gets an ERROR.
    LOGIN_REFUSED = "login-refused"
    #: The session sent an ERROR (the client's fault, a limit, a timeout, a shutdown).
    ERROR = "error"
    #: The credentials of a token login expired; the client gets an ERROR.
    CREDENTIALS_EXPIRED = "credentials-expired"
    #: A new token sent to ``/control/credentials`` was refused; the client gets an ERROR.
    CREDENTIALS_REFUSED = "credentials-refused"
    #: The client's DISCONNECT was handled, its receipt sent.
    DISCONNECT = "disconnect"
    #: The transport reports the connection gone, for whatever reason.
    CONNECTION_LOST = "connection-lost"


#: Which event moves a session from which state to which: the only place its
#: state changes (h11's ``EVENT_TRIGGERED_TRANSITIONS``).
TRANSITIONS: dict[State, dict[Event, State]] = {
    State.AWAITING_CONNECT: {
        Event.LOGIN_STARTED: State.AUTHENTICATING,
        # Without an authenticator, CONNECT lets the client in at once.
        Event.LOGIN_ACCEPTED: State.CONNECTED,
        Event.ERROR: State.CLOSING,
        Event.CONNECTION_LOST: State.CLOSED,
    },
    State.AUTHENTICATING: {
        Event.LOGIN_ACCEPTED: State.CONNECTED,
        Event.LOGIN_REFUSED: State.CLOSING,
        Event.ERROR: State.CLOSING,
        Event.CONNECTION_LOST: State.CLOSED,
    },
    State.CONNECTED: {
        Event.ERROR: State.CLOSING,
        # Only a connected session has credentials that expire or are renewed.
        Event.CREDENTIALS_EXPIRED: State.CLOSING,
        Event.CREDENTIALS_REFUSED: State.CLOSING,
        Event.DISCONNECT: State.CLOSING,
        Event.CONNECTION_LOST: State.CLOSED,
    },
    State.CLOSING: {Event.CONNECTION_LOST: State.CLOSED},
    # A transport may report the loss twice; nothing else happens to a closed session.
    State.CLOSED: {Event.CONNECTION_LOST: State.CLOSED},
}


class SessionStateError(RuntimeError):
    """An event the session's state does not allow: a bug in the broker, not the client's fault."""


class SessionState:
    """
    Where one session is in its life: :attr:`state`, changed only by
    :meth:`move` along :data:`TRANSITIONS`.  The session moves it; its parts
    read it.
    """

    __slots__ = ("state",)

    def __init__(self) -> None:
        self.state = State.AWAITING_CONNECT

    def move(self, event: Event) -> None:
        """
        Move to the state :data:`TRANSITIONS` gives for ``event``.

        :raises SessionStateError: if the table has none from the current state.
        """
        try:
            self.state = TRANSITIONS[self.state][event]
        except KeyError:
            raise SessionStateError(
                f"{event.name} cannot happen to a session in state {self.state.name}"
            ) from None

    def ending(self) -> bool:
        """:returns: whether the session is closing or closed."""
        state = self.state
        return state is State.CLOSING or state is State.CLOSED
