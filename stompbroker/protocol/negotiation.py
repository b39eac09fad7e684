"""
From CONNECT to CONNECTED: the protocol version, the heart-beat intervals, and
the client's login.

- :func:`negotiate_version` and :func:`negotiate_heartbeat` are pure functions
  of CONNECT's headers and the listener's offer (STOMP 1.2, "Protocol
  Negotiation" and "Heart-beating"), tested on their own;
  :func:`connected_frame` is the answer.
- :func:`on_connect` is the session's CONNECT handler.  Authentication,
  when ``SessionConfig.authenticator`` is set: CONNECT's ``login`` and
  ``passcode`` go to the authenticator, which answers with an identity or fails
  with :class:`~stompbroker.protocol.errors.LoginFailed`, maybe later (a
  Deferred, though this module never names Twisted).  Meanwhile the session is
  AUTHENTICATING: it reads nothing more from the socket, and frames that came
  with the CONNECT are held until the answer.  What else a CONNECT may log in
  with (a transport's bearer token or client certificate), and a token login's
  expiry, are the session's :class:`~stompbroker.protocol.login.Login` part.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from stompbroker.protocol.errors import LoginFailed, MalformedFrame, VersionMismatch
from stompbroker.protocol.frames import Frame
from stompbroker.protocol.states import Event, State

if TYPE_CHECKING:
    from stompbroker.protocol.session import StompSession

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


# -- the session's CONNECT handler ------------------------------------------------


def on_connect(session: StompSession, frame: Frame) -> None:
    """CONNECT (or STOMP): the version, the heart-beats, then the login."""
    config = session.config
    version = negotiate_version(frame.get("accept-version"), config.versions)
    session.version = version
    session._parser.use(version)
    if version != "1.0":
        session.heartbeat = negotiate_heartbeat(
            frame.get("heart-beat"), config.heartbeat, config.heartbeat_min
        )
    session.client_id = frame.get("client-id")
    hosted = session.broker.select_host(session, frame.get("host"))
    vhost = "/"
    if hosted is not None:
        vhost = hosted.vhost
        # A virtual host: its view of the broker, and its access rules.
        session.broker = hosted
        session.subscriptions.use(hosted)
        session.config = config = hosted.session_config(config)
    if config.resumption is not None:
        session.resume.read(frame)
    authenticator = config.authenticator
    if authenticator is None:
        if not session.resume.wait_for_resumed():
            open_session(session)
        return
    session._transition(Event.LOGIN_STARTED)
    # Frames that came with the CONNECT wait for the answer.
    session.receipts.start_holding()
    login = session.login.authenticate(authenticator, frame, vhost)
    login.addCallbacks(
        _logged_in, _login_refused, callbackArgs=(session,), errbackArgs=(session, frame)
    )
    if session.state is State.AUTHENTICATING:
        # No answer yet (a password is being checked): keep the wait, to
        # cancel it if the client goes, and read nothing more meanwhile.
        session.login.wait_on(login)
        session._pause_reading(BY_LOGIN)


def _logged_in(identity: Any, session: StompSession) -> None:
    """The authenticator let the client in: answer CONNECTED, then handle what waited."""
    session.login.wait_on(None)
    if session.state is not State.AUTHENTICATING:
        return
    session.login.accept(identity)
    if not session.resume.wait_for_resumed():
        let_in(session)


def let_in(session: StompSession) -> None:
    """The client is in (its token looked up in the cluster): CONNECTED, then what waited."""
    held = session.receipts.take_held()
    session._resume_reading(BY_LOGIN)
    open_session(session)
    # A resumed session that cannot be made again has failed in open_session.
    if not session._handling and session.error is None:
        session._handle(held)


def _login_refused(failure: Any, session: StompSession, frame: Frame) -> None:
    """
    The authenticator refused the client (after its delay), or the wait was cancelled.

    The client gets "login failed" and nothing more (the authenticator has
    logged why), then the connection closes.
    """
    session.login.wait_on(None)
    if session.state is not State.AUTHENTICATING:
        return
    error = failure.value
    if not isinstance(error, LoginFailed):
        error = LoginFailed()
    if error.receipt_id is None:
        error.receipt_id = frame.get("receipt")
    session._fail(error, Event.LOGIN_REFUSED)


def open_session(session: StompSession) -> None:
    """Answer a CONNECT whose client is let in: CONNECTED, heart-beats, no more timeout."""
    session.session_id = session.broker.new_session_id()
    session.timers.stop_connect_timer()
    session._transition(Event.LOGIN_ACCEPTED)
    extra, resumed = session.resume.headers()
    session.send_frame(
        connected_frame(
            session.version,
            session.session_id,
            session.config.server_name,
            session.heartbeat,
            extra,
        )
    )
    session.timers.start_heartbeats(session.heartbeat)
    if resumed is not None:
        session.resume.resume(resumed)
