"""
Tests of the session's part in credentials (``stompbroker.protocol.login``):
expiry on a live connection, renewal through ``/control/credentials``, and what
a transport adds to a CONNECT (a bearer token, a client certificate).

No sockets and no Twisted cred: a scripted authenticator answers, the broker and
the access rules are the recording fakes of :mod:`tests.support.session`, and
time is a ``task.Clock``.
"""

from __future__ import annotations

from typing import Any

import pytest
from attrs import frozen
from twisted.internet.defer import Deferred, fail, succeed
from twisted.internet.task import Clock

from stompbroker.protocol.login import CREDENTIALS_DESTINATION, LoginRefused
from stompbroker.protocol.session import TRANSITIONS, Event, SessionConfig, State
from stompbroker.transport.peer_credentials import PeerCredentials
from tests.support.session import FakeTransport, RecordingAccess, error_of, frame, make_session

#: When the first token expires, on the test clock.
EXPIRES = 60.0


@frozen
class Who:
    """An identity as the session sees one: a name and, for a token, an expiry."""

    name: str
    expires: float | None = None


class ScriptedAuthenticator:
    """
    Answers each passcode as the test says: an identity, an error, or nothing yet.

    :ivar calls: ``(login, passcode, peer, certificate)`` of every call.
    """

    def __init__(self, **answers: Any) -> None:
        self.answers = answers
        self.calls: list[tuple[Any, ...]] = []
        self.pending: dict[str, Deferred[Any]] = {}

    def __call__(
        self, login: str | None, passcode: str | None, peer: str, certificate: Any = None
    ) -> Deferred[Any]:
        self.calls.append((login, passcode, peer, certificate))
        answer = self.answers.get(passcode or "")
        if answer is None:
            self.pending[passcode or ""] = Deferred()
            return self.pending[passcode or ""]
        if isinstance(answer, Exception):
            return fail(answer)
        return succeed(answer)


def token_session(
    authenticator: ScriptedAuthenticator | None = None,
    access: Any = None,
    transport_extras: dict[str, Any] | None = None,
) -> tuple[Any, FakeTransport, Clock, Any, ScriptedAuthenticator]:
    """A session logged in with token ``t1``: alice, expiring at :data:`EXPIRES`."""
    authenticator = authenticator or ScriptedAuthenticator(
        t1=Who("alice", EXPIRES), t2=Who("alice", EXPIRES + 600)
    )
    config = SessionConfig(heartbeat=(0, 0), authenticator=authenticator, access=access)
    session, transport, clock, broker = make_session(config=config)
    for name, value in (transport_extras or {}).items():
        setattr(transport, name, value)
    session.receive_data(frame("CONNECT", ("accept-version", "1.2"), ("passcode", "t1")))
    [connected] = transport.frames()
    assert connected.command == "CONNECTED", connected
    return session, transport, clock, broker, authenticator


def renew(session: Any, token: str = "t2", *headers: tuple[str, str]) -> None:
    session.receive_data(
        frame("SEND", ("destination", CREDENTIALS_DESTINATION), *headers, body=token.encode())
    )


# -- expiry ----------------------------------------------------------------------------


def test_connection_ends_with_an_error_when_the_token_expires() -> None:
    """At the token's exp the client gets ERROR "credentials expired", then the close."""
    session, transport, clock, broker, _ = token_session()
    clock.advance(EXPIRES - 1)
    assert transport.frames() == [] and not transport.closed
    clock.advance(1)
    error = error_of(transport)
    assert error.get("message") == "credentials expired"
    assert b"'alice' expired at 1970-01-01T00:01:00Z" in error.body
    assert CREDENTIALS_DESTINATION.encode() in error.body
    assert session.state is State.CLOSING
    assert broker.named("close_connection") == [session]


def test_closing_cancels_the_expiry() -> None:
    """A connection that ends first leaves no expiry behind on the clock."""
    session, transport, clock, _, _ = token_session()
    session.receive_data(frame("DISCONNECT"))
    assert clock.getDelayedCalls() == []


def test_logins_without_expiry_schedule_nothing() -> None:
    """A password login (no expires) puts nothing on the clock."""
    authenticator = ScriptedAuthenticator(t1=Who("alice"))
    _, _, clock, _, _ = token_session(authenticator)
    assert clock.getDelayedCalls() == []


# -- renewal ---------------------------------------------------------------------------


def test_renewal_is_acknowledged_and_moves_the_expiry() -> None:
    """A valid new token gets the RECEIPT; the connection now lives until the new exp."""
    session, transport, clock, broker, authenticator = token_session()
    renew(session, "t2", ("receipt", "r1"))
    [receipt] = transport.frames()
    assert (receipt.command, receipt.get("receipt-id")) == ("RECEIPT", "r1")
    assert session.identity == Who("alice", EXPIRES + 600)
    assert authenticator.calls[-1] == (None, "t2", "127.0.0.1:5000", None)
    clock.advance(EXPIRES + 1)
    assert not transport.closed
    clock.advance(600)
    assert error_of(transport).get("message") == "credentials expired"
    assert broker.named("send") == []


def test_renewal_is_never_routed_and_needs_no_write_right() -> None:
    """A SEND to /control/credentials reaches neither the broker nor the access rules."""
    access = RecordingAccess(refused=CREDENTIALS_DESTINATION)
    session, transport, _, broker, _ = token_session(access=access)
    renew(session, "t2", ("receipt", "r1"))
    assert [f.command for f in transport.frames()] == ["RECEIPT"]
    assert broker.named("send") == [] and access.checks == []


def test_refused_renewal_ends_the_connection_naming_why() -> None:
    """A refused token gets ERROR "credentials refused: <reason>" with receipt-id, then a close."""
    authenticator = ScriptedAuthenticator(
        t1=Who("alice", EXPIRES), bad=LoginRefused("token expired", "it expired at noon")
    )
    session, transport, _, _, _ = token_session(authenticator)
    renew(session, "bad", ("receipt", "r1"))
    error = error_of(transport)
    assert error.get("message") == "credentials refused: token expired"
    assert error.get("receipt-id") == "r1"
    assert error.body == b"it expired at noon"
    assert session.identity == Who("alice", EXPIRES)
    assert session.state is State.CLOSING


def test_expiry_and_renewal_refusal_happen_only_to_a_connected_session() -> None:
    """The state table lets only a connected session's credentials expire or be refused."""
    for event in (Event.CREDENTIALS_EXPIRED, Event.CREDENTIALS_REFUSED):
        assert {state: moves[event] for state, moves in TRANSITIONS.items() if event in moves} == {
            State.CONNECTED: State.CLOSING
        }


def test_frames_after_a_renewal_refused_at_once_are_not_handled() -> None:
    """A renewal refused as soon as it is sent ends the connection before the frames after it."""
    authenticator = ScriptedAuthenticator(t1=Who("alice", EXPIRES), bob=Who("bob", 999.0))
    session, transport, _, broker, _ = token_session(authenticator)
    session.receive_data(
        frame("SEND", ("destination", CREDENTIALS_DESTINATION), body=b"bob")
        + frame("SEND", ("destination", "/topic/a"), body=b"after")
    )
    assert error_of(transport).get("message") == "credentials refused: another user"
    assert broker.named("send") == []
    assert session.state is State.CLOSING


def test_an_answer_after_the_connection_is_gone_changes_nothing() -> None:
    """A renewal refused after the client went away writes nothing and leaves the session closed."""
    session, transport, clock, _, authenticator = token_session(
        ScriptedAuthenticator(t1=Who("alice", EXPIRES))
    )
    renew(session, "slow")
    session.connection_lost()
    authenticator.pending["slow"].errback(LoginRefused("token expired"))
    assert transport.frames() == []
    assert session.state is State.CLOSED
    assert clock.getDelayedCalls() == []


def test_a_token_for_another_user_is_refused() -> None:
    """A connection keeps its user: a valid token for someone else ends it."""
    authenticator = ScriptedAuthenticator(t1=Who("alice", EXPIRES), bob=Who("bob", 999.0))
    session, transport, _, _, _ = token_session(authenticator)
    renew(session, "bob")
    error = error_of(transport)
    assert error.get("message") == "credentials refused: another user"
    assert session.identity.name == "alice"


def test_frames_after_a_renewal_wait_for_its_answer_and_get_the_new_rights() -> None:
    """Without a receipt, later frames wait until the new token is accepted, then use its rights."""
    access = RecordingAccess(refused="/topic/nowhere")
    authenticator = ScriptedAuthenticator(t1=Who("alice", EXPIRES))
    session, transport, _, broker, _ = token_session(authenticator, access)
    renew(session, "slow")
    session.receive_data(frame("SEND", ("destination", "/topic/a"), body=b"after"))
    assert broker.named("send") == []
    authenticator.pending["slow"].callback(Who("alice", 5000.0))
    assert [message.body for message in broker.named("send")] == [b"after"]
    assert session.identity.expires == 5000.0
    assert access.checks == [(Who("alice", 5000.0), "write", "/topic/a")]


@pytest.mark.parametrize(
    ("destination", "headers", "body", "message"),
    [
        ("/control/other", (), b"t2", "reserved destination"),
        (CREDENTIALS_DESTINATION, (("transaction", "tx"),), b"t2", "credentials in a transaction"),
        (CREDENTIALS_DESTINATION, (), b"  \n", "no token"),
        (CREDENTIALS_DESTINATION, (), b"\xff\xfe", "no token"),
    ],
)
def test_bad_control_sends_are_errors(
    destination: str, headers: tuple[tuple[str, str], ...], body: bytes, message: str
) -> None:
    """Anything under /control/ but a token sent to /control/credentials is an ERROR."""
    session, transport, _, broker, _ = token_session()
    if headers:
        session.receive_data(frame("BEGIN", ("transaction", "tx")))
    session.receive_data(frame("SEND", ("destination", destination), *headers, body=body))
    assert error_of(transport).get("message") == message
    assert broker.named("send") == []


def test_renewal_needs_a_token_login() -> None:
    """A connection that did not log in with a token has nothing to renew."""
    authenticator = ScriptedAuthenticator(t1=Who("alice"), t2=Who("alice", EXPIRES))
    session, transport, _, _, _ = token_session(authenticator)
    renew(session)
    assert error_of(transport).get("message") == "nothing to renew"


def test_control_destinations_are_reserved_without_authentication() -> None:
    """Even with no authenticator, /control/ is not a destination messages go to."""
    session, transport, _, broker = make_session(config=SessionConfig(heartbeat=(0, 0)))
    session.receive_data(frame("CONNECT", ("accept-version", "1.2")))
    renew(session)
    assert error_of(transport).get("message") == "nothing to renew"
    assert broker.named("send") == []


# -- what the transport adds to CONNECT ----------------------------------------------------


@frozen
class _TLSTransport:
    """A Twisted TLS transport, as far as a client certificate goes."""

    certificate: Any

    def getPeerCertificate(self) -> Any:  # noqa: N802 - Twisted's name
        return self.certificate


def test_transport_bearer_token_stands_in_for_a_missing_passcode() -> None:
    """A WebSocket's Authorization: Bearer token is the passcode of a CONNECT without one."""
    authenticator = ScriptedAuthenticator(ws=Who("alice", EXPIRES))
    config = SessionConfig(heartbeat=(0, 0), authenticator=authenticator)
    session, transport, _, _ = make_session(
        config=config, credentials=PeerCredentials(None, bearer_token="ws")
    )
    session.receive_data(frame("CONNECT", ("accept-version", "1.2"), ("login", "x")))
    assert transport.frames()[0].command == "CONNECTED"
    assert authenticator.calls == [("x", "ws", "127.0.0.1:5000", None)]


def test_client_certificate_is_offered_only_without_login_and_passcode() -> None:
    """The TLS client certificate is offered to a CONNECT that sends neither login nor passcode."""
    authenticator = ScriptedAuthenticator(**{"": Who("CN"), "pw": Who("bob")})
    config = SessionConfig(heartbeat=(0, 0), authenticator=authenticator)
    for headers, certificate in (((), "the certificate"), ((("passcode", "pw"),), None)):
        session, transport, _, _ = make_session(
            config=config, credentials=PeerCredentials(_TLSTransport("the certificate"))
        )
        session.receive_data(frame("CONNECT", ("accept-version", "1.2"), *headers))
        assert transport.frames()[0].command == "CONNECTED"
        assert authenticator.calls[-1][3] == certificate
