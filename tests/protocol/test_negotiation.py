"""
From CONNECT to CONNECTED (stompbroker.protocol.negotiation): the version and
heart-beat negotiation as pure functions, the CONNECTED frame, and a session's
CONNECT with and without a login, against the recording broker.
"""

from __future__ import annotations

from typing import Any

import pytest
from twisted.internet.defer import Deferred, fail, succeed
from zope.interface.verify import verifyObject

from stompbroker.interfaces import IConnection
from stompbroker.protocol.errors import LoginFailed
from stompbroker.protocol.login import LoginRefused
from stompbroker.protocol.negotiation import (
    connected_frame,
    negotiate_heartbeat,
    negotiate_version,
)
from stompbroker.protocol.session import SessionConfig, State
from stompbroker.security.identity import Identity
from tests.support.session import connected, error_of, frame, make_session

# -- the rules, on their own ------------------------------------------------------------


@pytest.mark.parametrize(
    "accept, expected",
    [(None, "1.0"), ("1.0", "1.0"), ("1.1", "1.1"), ("1.0,1.1,1.2", "1.2"), ("1.1, 1.0", "1.1")],
)
def test_version_negotiation_picks_highest_common(accept: str | None, expected: str) -> None:
    """
    STOMP 1.2, "Protocol Negotiation": the highest version both sides accept wins; none means
    1.0.
    """
    assert negotiate_version(accept, ("1.2", "1.1", "1.0")) == expected


@pytest.mark.parametrize(
    "client, server, floor, expected",
    [
        (None, (10000, 10000), (1000, 1000), (0, 0)),
        ("0,0", (10000, 10000), (1000, 1000), (0, 0)),
        ("1000,1000", (10000, 10000), (1000, 1000), (1000, 1000)),
        ("4000,6000", (10000, 10000), (1000, 1000), (6000, 4000)),
        ("20000,30000", (10000, 10000), (1000, 1000), (30000, 20000)),
        ("100,200", (10000, 10000), (1000, 500), (1000, 500)),
        ("1000,0", (10000, 10000), (1000, 1000), (0, 1000)),
        ("1000,1000", (0, 0), (1000, 1000), (0, 0)),
        ("1000,1000", (0, 10000), (0, 0), (0, 1000)),
    ],
)
def test_heartbeat_negotiation_follows_the_client(
    client: str | None, server: tuple[int, int], floor: tuple[int, int], expected
) -> None:
    """
    STOMP 1.2, "Heart-beating": each direction runs at the client's interval raised to the
    floor, and is off when either side says 0 (issue 14, as RabbitMQ does).
    """
    assert negotiate_heartbeat(client, server, floor) == expected


@pytest.mark.parametrize(
    "version, heart_beat", [("1.2", "1000,2000"), ("1.1", "1000,2000"), ("1.0", None)]
)
def test_connected_frame_offers_heart_beats_except_in_1_0(
    version: str, heart_beat: str | None
) -> None:
    """STOMP 1.2, "CONNECTED Frame": heart-beat is the server's offer; 1.0 has no heart-beats."""
    answer = connected_frame(version, "s-9", "stompbroker/x", (1000, 2000))
    assert answer.command == "CONNECTED"
    assert answer.get("version") == version
    assert answer.get("session") == "s-9"
    assert answer.get("server") == "stompbroker/x"
    assert answer.get("heart-beat") == heart_beat


# -- a session's CONNECT ----------------------------------------------------------------


def test_connected_frame_carries_version_session_server_heartbeat() -> None:
    """
    STOMP 1.2, "CONNECTED Frame": version, session, server, and heart-beat with the intervals
    applied (send, then receive), the client's own raised to the floor.
    """
    session, transport, _, broker = make_session(
        config=SessionConfig(
            server_name="stompbroker/test", heartbeat=(3000, 4000), heartbeat_min=(1500, 1000)
        )
    )
    session.receive_data(
        frame("STOMP", ("accept-version", "1.1,1.2"), ("host", "/"), ("heart-beat", "2000,1000"))
    )
    [reply] = transport.frames()
    assert reply.command == "CONNECTED"
    assert reply.get("version") == "1.2"
    assert reply.get("session") == "s1"
    assert reply.get("server") == "stompbroker/test"
    assert reply.get("heart-beat") == "1500,2000"
    assert session.heartbeat == (1500, 2000)
    assert session.state is State.CONNECTED
    assert session in broker.connections
    verifyObject(IConnection, session)


def test_connect_without_accept_version_is_1_0() -> None:
    """STOMP 1.1, "Protocol Negotiation": a CONNECT without accept-version speaks 1.0."""
    session, transport, _, _ = make_session()
    session.receive_data(b"CONNECT\nlogin:guest\n\n\x00")
    [reply] = transport.frames()
    assert reply.get("version") == "1.0"
    assert reply.get("heart-beat") is None
    assert session.version == "1.0"


def test_no_common_version_errors_with_version_header_and_closes() -> None:
    """STOMP 1.2, "Protocol Negotiation": the ERROR lists the versions the server speaks."""
    session, transport, _, _ = make_session()
    session.receive_data(frame("CONNECT", ("accept-version", "2.0,3.1")))
    error = error_of(transport)
    assert error.get("version") == "1.2,1.1,1.0"
    assert "version" in error.get("message", "")
    assert b"2.0,3.1" in error.body


def test_malformed_heartbeat_header_is_an_error() -> None:
    """A heart-beat header that is not two integers is an error."""
    session, transport, _, _ = make_session()
    session.receive_data(frame("CONNECT", ("accept-version", "1.2"), ("heart-beat", "fast")))
    assert error_of(transport).get("message") == "invalid heart-beat header"


def test_connect_client_id_is_kept() -> None:
    """The CONNECT frame's client-id scopes the connection's durable subscription names."""
    session, transport, _, _ = make_session()
    session.receive_data(frame("CONNECT", ("accept-version", "1.2"), ("client-id", "app-7")))
    assert session.client_id == "app-7"
    assert connected()[0].client_id is None


# -- login ------------------------------------------------------------------------------


def authenticating(answer: Any) -> tuple[Any, Any, list[tuple[Any, ...]]]:
    """:returns: a session whose authenticator answers ``answer``, its transport, and the asks."""
    asked: list[tuple[Any, ...]] = []

    def authenticator(login: str | None, passcode: str | None, peer: str) -> Any:
        asked.append((login, passcode, peer))
        return answer

    session, transport, _, _ = make_session(config=SessionConfig(authenticator=authenticator))
    return session, transport, asked


def test_login_answered_later_holds_what_came_with_connect() -> None:
    """
    While the authenticator thinks, the session reads nothing and holds the frames that came
    with CONNECT; once the client is let in it answers CONNECTED, then handles them.
    """
    answer: Deferred[Any] = Deferred()
    session, transport, asked = authenticating(answer)
    session.receive_data(
        frame("CONNECT", ("accept-version", "1.2"), ("login", "alice"), ("passcode", "pw"))
        + frame("SUBSCRIBE", ("id", "1"), ("destination", "/topic/a"), ("receipt", "r"))
    )
    assert asked == [("alice", "pw", "127.0.0.1:5000")]
    assert session.state is State.AUTHENTICATING
    assert transport.take() == b""
    assert not transport.reading
    answer.callback(Identity("alice"))
    assert [f.command for f in transport.frames()] == ["CONNECTED", "RECEIPT"]
    assert transport.reading
    assert session.identity == Identity("alice")


def test_login_answered_at_once_goes_on_in_the_same_read() -> None:
    """An authenticator that answers at once lets the rest of the read go on without a pause."""
    session, transport, _ = authenticating(succeed(Identity("bob")))
    session.receive_data(
        frame("CONNECT", ("accept-version", "1.2"), ("login", "bob"))
        + frame("SUBSCRIBE", ("id", "1"), ("destination", "/topic/a"), ("receipt", "r"))
    )
    assert [f.command for f in transport.frames()] == ["CONNECTED", "RECEIPT"]
    assert transport.reading


def test_frames_held_past_the_limit_during_a_login_do_not_stop_reading_for_good() -> None:
    """
    Frames that came with CONNECT past max_held_bytes stop reading while the login is
    checked, and reading starts again once the client is let in (it stayed stopped).
    """
    answer: Deferred[Any] = Deferred()
    config = SessionConfig(authenticator=lambda login, passcode, peer: answer, max_held_bytes=50)
    session, transport, _, _ = make_session(config=config)
    session.receive_data(
        frame("CONNECT", ("accept-version", "1.2"), ("login", "alice"))
        + frame("SEND", ("destination", "/queue/a"), body=b"x" * 100)
    )
    assert not transport.reading
    answer.callback(Identity("alice"))
    assert transport.reading
    session.receive_data(frame("SEND", ("destination", "/queue/a"), ("receipt", "r")))
    assert [f.command for f in transport.frames()] == ["CONNECTED", "RECEIPT"]


@pytest.mark.parametrize("refusal", [LoginFailed(), ValueError("checker broke")])
def test_refused_login_is_login_failed_and_nothing_more(refusal: Exception) -> None:
    """
    A refused login (or an authenticator that breaks) gets "login failed", with the CONNECT's
    receipt id, and the connection closes.
    """
    session, transport, _ = authenticating(fail(refusal))
    session.receive_data(frame("CONNECT", ("accept-version", "1.2"), ("receipt", "c")))
    error = error_of(transport)
    assert (error.get("message"), error.get("receipt-id")) == ("login failed", "c")
    assert b"checker" not in error.body
    assert session.state is State.CLOSING


def test_a_login_refused_before_connected_is_not_escaped() -> None:
    """
    The ERROR of a refused login goes before CONNECTED, when the client knows no
    version, so its ``message`` is sent as it reads (STOMP 1.2, "Value Encoding",
    applies once 1.2 is negotiated): stompjs does not undo escapes there.
    """
    session, transport, _ = authenticating(fail(LoginRefused("bad password")))
    session.receive_data(frame("CONNECT", ("accept-version", "1.2"), ("receipt", "a:b")))
    written = transport.take()
    assert b"\nmessage:login failed: bad password\n" in written
    assert b"\nreceipt-id:a:b\n" in written


def test_an_error_after_connected_is_escaped_in_1_2() -> None:
    """Once CONNECTED is out the version is known: an ERROR's headers are escaped (1.2)."""
    session, transport, _ = authenticating(succeed(Identity("alice")))
    session.receive_data(frame("CONNECT", ("accept-version", "1.2")))
    transport.take()
    session.receive_data(frame("SEND", ("receipt", "r:1")))
    assert b"\nreceipt-id:r\\c1\n" in transport.take()


def test_a_client_gone_during_login_cancels_the_wait() -> None:
    """When the connection is lost while the authenticator thinks, its answer is cancelled."""
    cancelled: list[Any] = []
    answer: Deferred[Any] = Deferred(cancelled.append)
    session, transport, _ = authenticating(answer)
    session.receive_data(frame("CONNECT", ("accept-version", "1.2"), ("login", "alice")))
    session.connection_lost()
    assert cancelled == [answer]
    assert session.state is State.CLOSED
    assert transport.take() == b""
