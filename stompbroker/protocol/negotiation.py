"""
From CONNECT to CONNECTED: the protocol version, the heart-beat intervals, and
the client's login.

- :func:`negotiate_version` and :func:`negotiate_heartbeat` are pure functions
  of CONNECT's headers and the listener's offer (STOMP 1.2, "Protocol
  Negotiation" and "Heart-beating"), tested on their own;
  :func:`connected_frame` is the answer.
- :class:`HandshakeMixin` is the session's CONNECT handler.  Authentication,
  when ``SessionConfig.authenticator`` is set: CONNECT's ``login`` and
  ``passcode`` go to the authenticator, which answers with an identity or fails
  with :class:`~stompbroker.protocol.errors.LoginFailed`, maybe later (a
  Deferred, though this module never names Twisted).  Meanwhile the session is
  AUTHENTICATING: it reads nothing more from the socket, and frames that came
  with the CONNECT are held until the answer.  What else a CONNECT may log in
  with (a transport's bearer token or client certificate), and a token login's
  expiry, are in :mod:`~stompbroker.protocol.login`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from stompbroker.protocol.errors import LoginFailed, MalformedFrame, VersionMismatch
from stompbroker.protocol.frames import Frame
from stompbroker.protocol.parts import SessionPart
from stompbroker.protocol.states import Event, State

#: Why a session has stopped reading: it waits for the authenticator.
BY_LOGIN = "login"


def negotiate_version(accept_version: str | None, ours: tuple[str, ...]) -> str:
    """
    Pick the protocol version for a connection (STOMP 1.2, "Protocol Negotiation").

    :param accept_version: the CONNECT frame's ``accept-version``; absent means 1.0.
    :param ours: the versions we speak, best first.
    :returns: the highest version both sides speak.
    :raises VersionMismatch: when there is none.
    """
    if accept_version is None:
        offered = {"1.0"}
    else:
        offered = {part.strip() for part in accept_version.split(",")}
    for version in ours:
        if version in offered:
            return version
    raise VersionMismatch(
        "unsupported protocol version",
        f"client accepts {accept_version!r}; this broker speaks {','.join(ours)}",
    )


def negotiate_heartbeat(
    client: str | None, server: tuple[int, int], floor: tuple[int, int] = (0, 0)
) -> tuple[int, int]:
    """
    Agree heart-beat intervals (STOMP 1.2, "Heart-beating") at the client's pace.

    The spec's rule takes the larger of the two offers, which made the server's
    offer the floor of both directions: a browser asking for a beat every second
    waited ten, and a dead one was noticed after twenty.  As RabbitMQ does, the
    client's values are used instead, raised to ``floor`` so that a client cannot
    make the broker beat or check more often than it is willing to.  The
    server's values only say whether it beats (or checks) at all: 0 turns a
    direction off, as does the client's 0.

    :param client: the CONNECT frame's ``heart-beat`` header, ``"cx,cy"``; absent
        means ``"0,0"``.
    :param server: ``(sx, sy)`` in ms; 0 in a direction turns it off.
    :param floor: the shortest intervals ``(send, receive)`` applied, in ms.
    :returns: ``(send_ms, receive_ms)``: how often we must send, and how often we
        expect to hear from the client; 0 means not at all.
    :raises MalformedFrame: when the header is not two non-negative integers.
    """
    if client is None:
        return (0, 0)
    try:
        cx_text, cy_text = client.split(",")
        cx, cy = int(cx_text), int(cy_text)
    except ValueError:
        cx = cy = -1
    if cx < 0 or cy < 0:
        raise MalformedFrame(
            "invalid heart-beat header",
            f"heart-beat must be two non-negative integers 'cx,cy', got {client!r}",
        )
    sx, sy = server
    send = max(cy, floor[0]) if sx and cy else 0
    receive = max(cx, floor[1]) if cx and sy else 0
    return (send, receive)


def connected_frame(
    version: str,
    session_id: str,
    server_name: str,
    heartbeat: tuple[int, int],
    extra: tuple[tuple[str, str], ...] = (),
) -> Frame:
    """
    The answer to a CONNECT whose client is let in (STOMP 1.2, "CONNECTED Frame").

    :param version: the version negotiated.
    :param session_id: the broker-unique id of the session.
    :param server_name: the ``server`` header.
    :param heartbeat: the intervals applied ``(send, receive)`` in ms, which the
        client reads as the server's offer and so derives the same two; STOMP 1.0
        has no heart-beats, so a 1.0 CONNECTED does not carry it.
    :param extra: more headers (a resumable session's, say).
    """
    headers = [("version", version), ("session", session_id), ("server", server_name)]
    if version != "1.0":
        sx, sy = heartbeat
        headers.append(("heart-beat", f"{sx},{sy}"))
    return Frame("CONNECTED", tuple(headers) + extra)


class HandshakeMixin(SessionPart):
    """
    The session's CONNECT (or STOMP) handler, and the authenticator's answer.
    Mixed into :class:`~stompbroker.protocol.session.StompSession`, as its other
    parts are.
    """

    __slots__ = ()

    #: The session's slots this part owns.
    SLOTS: tuple[str, ...] = (
        "client_id",
        "heartbeat",
        "identity",
        "session_id",
        "version",
        "_login",
    )

    client_id: str | None
    heartbeat: tuple[int, int]
    identity: Any
    session_id: str
    version: str
    _login: Any
    # Of the session's other parts.
    _parser: Any
    _authenticate_connect: Callable[[Any, Frame], Any]
    _watch_expiry: Callable[[Any], None]
    error: Any

    def _init_handshake(self) -> None:
        #: The broker-unique id sent in CONNECTED; empty until then.
        self.session_id = ""
        #: The version negotiated; 1.2's rules until CONNECT says otherwise.
        self.version = "1.2"
        #: ``(send_ms, receive_ms)`` negotiated; none before CONNECT, nor for 1.0.
        self.heartbeat = (0, 0)
        #: The CONNECT frame's ``client-id``, which scopes durable subscription names.
        self.client_id = None
        #: Who the client logged in as (see ``SessionConfig.authenticator``).
        self.identity = None
        #: The authenticator's answer being waited for, to cancel if the client goes.
        self._login = None

    def _on_connect(self, frame: Frame) -> None:
        self.version = negotiate_version(frame.get("accept-version"), self.config.versions)
        self._parser.version = self.version
        if self.version != "1.0":
            config = self.config
            self.heartbeat = negotiate_heartbeat(
                frame.get("heart-beat"), config.heartbeat, config.heartbeat_min
            )
        self.client_id = frame.get("client-id")
        if self.config.resumption is not None:
            self.resume.read(frame)
        authenticator = self.config.authenticator
        if authenticator is None:
            if not self.resume.wait_for_resumed():
                self._open()
            return
        self._transition(Event.LOGIN_STARTED)
        # Frames that came with the CONNECT wait for the answer.
        self.receipts.start_holding()
        login = self._authenticate_connect(authenticator, frame)
        login.addCallbacks(self._logged_in, self._login_refused, errbackArgs=(frame,))
        if self.state is State.AUTHENTICATING:
            # No answer yet (a password is being checked): keep the wait, to
            # cancel it if the client goes, and read nothing more meanwhile.
            self._login = login
            self._pause_reading(BY_LOGIN)

    def _wait_on(self, answer: Any) -> None:
        """Keep the answer waited for before CONNECTED (``None``: none), to cancel it."""
        self._login = answer

    def _logged_in(self, identity: Any) -> None:
        """The authenticator let the client in: answer CONNECTED, then handle what waited."""
        self._login = None
        if self.state is not State.AUTHENTICATING:
            return
        self.identity = identity
        self._watch_expiry(identity)
        if not self.resume.wait_for_resumed():
            self._let_in()

    def _let_in(self) -> None:
        """The client is in (its token looked up in the cluster): CONNECTED, then what waited."""
        held = self.receipts.take_held()
        self._resume_reading(BY_LOGIN)
        self._open()
        # A resumed session that cannot be made again has failed in _open.
        if not self._handling and self.error is None:
            self._handle(held)

    def _login_refused(self, failure: Any, frame: Frame) -> None:
        """
        The authenticator refused the client (after its delay), or the wait was cancelled.

        The client gets "login failed" and nothing more (the authenticator has
        logged why), then the connection closes.
        """
        self._login = None
        if self.state is not State.AUTHENTICATING:
            return
        error = failure.value
        if not isinstance(error, LoginFailed):
            error = LoginFailed()
        if error.receipt_id is None:
            error.receipt_id = frame.get("receipt")
        self._fail(error, Event.LOGIN_REFUSED)

    def _open(self) -> None:
        """Answer a CONNECT whose client is let in: CONNECTED, heart-beats, no more timeout."""
        self.session_id = self.broker.new_session_id()
        self.timers.stop_connect_timer()
        self._transition(Event.LOGIN_ACCEPTED)
        config = self.config
        extra, resumed = self.resume.headers()
        self.send_frame(
            connected_frame(
                self.version, self.session_id, config.server_name, self.heartbeat, extra
            )
        )
        self.timers.start_heartbeats(self.heartbeat)
        if resumed is not None:
            self.resume.resume(resumed)
