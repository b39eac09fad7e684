"""
From CONNECT to CONNECTED: the protocol version, the heart-beat intervals, and
the client's login.

- :func:`negotiate_version` and :func:`negotiate_heartbeat` are pure functions
  of CONNECT's headers and the listener's offer (STOMP 1.2, "Protocol
  Negotiation" and "Heart-beating"), tested on their own;
  :func:`connected_frame` is the answer.
- The session's CONNECT handler sequences these and the login.  Authentication,
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

from stompbroker.protocol.errors import MalformedFrame, VersionMismatch
from stompbroker.protocol.frames import Frame

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
