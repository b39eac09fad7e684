"""
Credentials on a live connection: what a CONNECT logs in with, when a token
expires, and how a client renews it without reconnecting.

Theory of operation
-------------------
A login with a token (``--auth jwt:...``) gives an identity that expires (its
``expires``, the token's ``exp``).  The session schedules, on its clock, an
ERROR ``credentials expired`` and a close for that moment.  Before then the
client may send a fresh token::

    SEND
    destination:/control/credentials
    receipt:renew-1

    eyJhbGciOiJSUzI1NiIsInR5cCI6IkpXVCJ9...^@

The body is the new token (``client.publish({destination:
'/control/credentials', body: token})`` in ``@stomp/stompjs``).  It is checked by
the same authenticator as a CONNECT, and must be for the same user.  Accepted:
the new identity (its rights and its expiry) applies from the next frame, and
the SEND's RECEIPT, if it asked for one, says so.  Refused: an ERROR naming why
(``credentials refused: token expired``) and a close (the events
``CREDENTIALS_EXPIRED`` and ``CREDENTIALS_REFUSED`` of the session's
``TRANSITIONS``, which only a connected session may meet).  The answer goes through
the session's queue of replies, so receipts keep their order, and frames the
client sends meanwhile wait for it unless the SEND asked for a receipt (then the
old token's rights apply to them until the answer, which the broker's own token
checker gives at once).

``/control/`` is reserved: no message is ever routed there (the broker serves no
such destination), a SEND to anything else under it is an ERROR, and a SEND to
``/control/credentials`` needs no ``write`` right.

:class:`Login` is the session's part that holds this: who the client is (its
identity), the authenticator's answer while it is awaited, and the expiry
timer.  It is given the session's clock, the connection's credentials,
settings, state, a way to end it, and a place among its replies, and imports no
Twisted (the authenticator's answer is a Deferred this module never names).
The credentials are the connection's ``bearer_token`` (a WebSocket's
``Authorization: Bearer``) and ``peer_certificate()`` (a TLS client certificate
the listener verified); either may be ``None``.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable
from typing import Any

from stompbroker.protocol.config import SessionConfig
from stompbroker.protocol.errors import (
    InvalidDestination,
    LoginFailed,
    MalformedFrame,
    NotSupported,
    ProtocolError,
)
from stompbroker.protocol.frames import Frame
from stompbroker.protocol.parts import Clock, Credentials, Failing, StateView, Timer
from stompbroker.protocol.states import Event, State

__all__ = [
    "CONTROL_PREFIX",
    "CREDENTIALS_DESTINATION",
    "CredentialsExpired",
    "Login",
    "LoginRefused",
    "RenewalRefused",
    "utc_text",
]

#: Destinations the broker reserves for messages to itself.
CONTROL_PREFIX = "/control/"
#: Where a client sends a fresh token.
CREDENTIALS_DESTINATION = CONTROL_PREFIX + "credentials"


class LoginRefused(LoginFailed):
    """
    A login refused for a reason the client may be told: an expired token, a
    wrong audience, a certificate without a common name.

    :param reason: a few words, after ``login failed:`` in the ERROR's ``message``.
    :param detail: a sentence for the ERROR's body.
    """

    def __init__(self, reason: str, detail: str = "", receipt_id: str | None = None) -> None:
        ProtocolError.__init__(self, f"login failed: {reason}", detail or reason, receipt_id)
        self.reason = reason


class RenewalRefused(ProtocolError):
    """
    A new token sent to ``/control/credentials`` was not accepted; the connection ends.

    :param reason: a few words, after ``credentials refused:`` in the ERROR's ``message``.
    :param detail: a sentence for the ERROR's body.
    """

    def __init__(self, reason: str, detail: str = "", receipt_id: str | None = None) -> None:
        super().__init__(f"credentials refused: {reason}", detail or reason, receipt_id)
        self.reason = reason


class CredentialsExpired(ProtocolError):
    """The connection's token expired before the client sent a new one."""


def utc_text(seconds: float) -> str:
    """:returns: POSIX ``seconds`` as an ISO 8601 UTC time, for error messages."""
    moment = datetime.datetime.fromtimestamp(seconds, datetime.UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


class Login:
    """
    The session's part in logging in and staying logged in (see the module
    docstring).

    :param credentials: what a CONNECT may log in with besides its headers.
    :param clock: for the expiry.
    :param peer: the client's address, told to the authenticator.
    :param config: the listener's settings (``authenticator``).
    :param life: the session's state, read: only a connected session renews.
    :param fail: ends the session with an ERROR (credentials expired or refused).
    :param when_stored: the session's reply queue's ``when_stored``, where a
        renewal's answer takes its place among the receipts.
    """

    __slots__ = (
        "identity",
        "_answer",
        "_clock",
        "_config",
        "_credentials",
        "_expiry_timer",
        "_fail",
        "_life",
        "_peer",
        "_vhost",
        "_when_stored",
    )

    def __init__(
        self,
        credentials: Credentials,
        clock: Clock,
        peer: str,
        config: SessionConfig,
        life: StateView,
        fail: Failing,
        when_stored: Callable[..., None],
    ) -> None:
        self._peer = peer
        self._config = config
        self._life = life
        self._fail = fail
        self._when_stored = when_stored
        self._credentials = credentials
        self._clock = clock
        #: Who the client logged in as (see ``SessionConfig.authenticator``).
        self.identity: Any = None
        #: The answer being waited for before CONNECTED (the authenticator's,
        #: or the cluster's about a resume token), to cancel if the client goes.
        self._answer: Any = None
        #: Ends the connection when a token login's credentials expire.
        self._expiry_timer: Timer | None = None
        #: The virtual host CONNECT selected, which a renewal is asked about again.
        self._vhost = "/"

    @property
    def waiting(self) -> Any:
        """The answer waited for before CONNECTED, or ``None``."""
        return self._answer

    def wait_on(self, answer: Any) -> None:
        """Keep the answer waited for before CONNECTED (``None``: it came), to cancel it."""
        self._answer = answer

    def accept(self, identity: Any) -> None:
        """The client is who ``identity`` says: its rights and expiry apply from now."""
        self.identity = identity
        self._watch_expiry(identity)

    def stop(self) -> None:
        """The session ends: cancel the answer waited for, and the expiry."""
        answer, self._answer = self._answer, None
        if answer is not None:
            answer.cancel()
        self._stop_expiry()

    # -- CONNECT ---------------------------------------------------------------

    def authenticate(self, authenticator: Any, frame: Frame, vhost: str = "/") -> Any:
        """
        Ask the authenticator about a CONNECT to virtual host ``vhost`` (``/``: the default one).

        Without a ``passcode``, the transport's bearer token stands in for it; with
        neither ``login`` nor ``passcode``, the client's verified TLS certificate
        is offered, when it has one.

        :returns: the authenticator's answer: a Deferred of the identity.
        """
        self._vhost = vhost
        login = frame.get("login")
        passcode = frame.get("passcode")
        credentials = self._credentials
        if not passcode:
            passcode = credentials.bearer_token or passcode
        if not login and not passcode:
            certificate = credentials.peer_certificate()
            if certificate is not None:
                return authenticator(
                    login, passcode, self._peer, certificate=certificate, **self._host()
                )
        return authenticator(login, passcode, self._peer, **self._host())

    def _host(self) -> dict[str, str]:
        """The authenticator's ``vhost``, given only for a virtual host other than the default."""
        return {} if self._vhost == "/" else {"vhost": self._vhost}

    # -- expiry ----------------------------------------------------------------

    def _watch_expiry(self, identity: Any) -> None:
        """Schedule the end of the connection at the identity's expiry (none for most)."""
        self._stop_expiry()
        expires = getattr(identity, "expires", None)
        if expires is None:
            return
        clock = self._clock
        self._expiry_timer = clock.callLater(
            max(0.0, expires - clock.seconds()), self._credentials_expired, expires
        )

    def _stop_expiry(self) -> None:
        timer, self._expiry_timer = self._expiry_timer, None
        if timer is not None and timer.active():
            timer.cancel()

    def _credentials_expired(self, expires: float) -> None:
        self._expiry_timer = None
        self._fail(
            CredentialsExpired(
                "credentials expired",
                f"the token of {self.identity.name!r} expired at {utc_text(expires)}; a client"
                f" stays connected by sending a new one to {CREDENTIALS_DESTINATION}"
                " before its token expires",
            ),
            Event.CREDENTIALS_EXPIRED,
        )

    # -- renewal ---------------------------------------------------------------

    def on_control(self, frame: Frame, destination: str) -> None:
        """
        Handle a SEND to ``/control/...``: a new token for ``/control/credentials``.

        :raises InvalidDestination: for any other destination under ``/control/``.
        :raises NotSupported: inside a transaction, or on a connection that did
            not log in with a token.
        :raises MalformedFrame: for a SEND without a token in its body.
        """
        if destination != CREDENTIALS_DESTINATION:
            raise InvalidDestination(
                "reserved destination",
                f"{destination[:80]!r} is under {CONTROL_PREFIX}, which the broker keeps"
                f" for messages to itself; the only one is {CREDENTIALS_DESTINATION}",
            )
        if frame.get("transaction") is not None:
            raise NotSupported(
                "credentials in a transaction",
                f"a new token sent to {CREDENTIALS_DESTINATION} applies at once: send it"
                " outside transactions",
            )
        authenticator = self._config.authenticator
        if authenticator is None or getattr(self.identity, "expires", None) is None:
            raise NotSupported(
                "nothing to renew",
                "this connection did not log in with a token, so its credentials do not"
                f" expire; {CREDENTIALS_DESTINATION} takes new tokens for token logins",
            )
        try:
            token = frame.body.decode("utf-8").strip()
        except UnicodeDecodeError:
            token = ""
        if not token:
            raise MalformedFrame(
                "no token",
                f"a SEND to {CREDENTIALS_DESTINATION} carries the new token as its body",
            )
        answer = authenticator(None, token, self._peer, **self._host())
        answer.addCallbacks(
            self._renewed, self._renewal_refused, callbackArgs=(frame,), errbackArgs=(frame,)
        )
        if self._life.state is State.CONNECTED:
            # Not refused at once: the answer takes its place among the receipts.
            self._when_stored(answer, frame, hold=True)

    def _renewed(self, identity: Any, frame: Frame) -> None:
        """
        The new token is valid: it must be the same user's; then its rights and
        expiry apply.  Another user's token, or credentials that do not expire,
        end the connection.
        """
        if self._life.state is not State.CONNECTED:
            return
        if getattr(identity, "expires", None) is None:
            self._refuse_renewal(
                RenewalRefused(
                    "not a token", f"{CREDENTIALS_DESTINATION} takes tokens, which expire"
                ),
                frame,
            )
        elif identity.name != self.identity.name:
            self._refuse_renewal(
                RenewalRefused(
                    "another user",
                    f"the new token is for {identity.name!r}; this connection logged in as"
                    f" {self.identity.name!r}, and a connection keeps its user",
                ),
                frame,
            )
        else:
            self.accept(identity)

    def _renewal_refused(self, failure: Any, frame: Frame) -> Any:
        """
        The authenticator refused the new token (after its delay): say that it
        was the renewal that failed, not a login.  Any other failure goes on to
        the reply queue's, as a store's would.
        """
        error = failure.value
        if isinstance(error, LoginRefused):
            self._refuse_renewal(RenewalRefused(error.reason, error.detail), frame)
        elif isinstance(error, LoginFailed):
            self._refuse_renewal(
                RenewalRefused("invalid token", "the new token was not accepted"), frame
            )
        else:
            return failure
        return None

    def _refuse_renewal(self, error: RenewalRefused, frame: Frame) -> None:
        """End the connection with the renewal's refusal, answering the SEND's receipt."""
        if self._life.state is not State.CONNECTED:
            return
        error.receipt_id = frame.get("receipt")
        self._fail(error, Event.CREDENTIALS_REFUSED)
