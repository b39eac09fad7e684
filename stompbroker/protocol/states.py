"""
Where a session is in its life, and the events that move it on.

The table of which event moves a session from which state to which is
:data:`stompbroker.protocol.session.TRANSITIONS`; this module holds only the
names, so that the session's parts (each a module of its own) can test the state
without importing the session.
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
