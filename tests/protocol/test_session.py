"""
Tests of the session's state machine and edge, against a recording fake broker
and a list of bytes: the states and what moves them, bad input, DISCONNECT and
losing the connection, and what the session tells statistics.  Its parts have
test modules of their own (test_negotiation, test_publishing,
test_client_subscriptions, test_receipts, test_slow_consumer, test_timers).

No sockets and no reactor: time is a ``task.Clock``.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import pytest
from twisted.internet.defer import Deferred
from zope.interface.verify import verifyObject

from stompbroker.interfaces import ConnectionDescription, IBroker, IConnection
from stompbroker.protocol import session as session_module
from stompbroker.protocol.errors import ProtocolError
from stompbroker.protocol.frames import Frame
from stompbroker.protocol.session import (
    HANDLERS,
    TRANSITIONS,
    Event,
    SessionConfig,
    SessionStateError,
    State,
)
from stompbroker.protocol.states import SessionState
from stompbroker.security.identity import ANONYMOUS_IDENTITY, Identity
from tests.support.session import RecordingBroker, connected, error_of, frame, make_session

# -- bad input ----------------------------------------------------------------


def test_frame_before_connect_is_an_error() -> None:
    """Any frame but CONNECT or STOMP first gets an ERROR naming it, then a close."""
    session, transport, _, broker = make_session()
    session.receive_data(frame("SEND", ("destination", "/topic/a"), ("receipt", "r1")))
    error = error_of(transport)
    assert error.get("message") == "expected CONNECT"
    assert error.get("receipt-id") == "r1"
    assert b"SEND" in error.body
    assert not any(call == "send" for call, _ in broker.calls)


def test_input_after_error_is_ignored() -> None:
    """After an ERROR the session reads nothing more (crossbar MQTT PROTOCOL_VIOLATION)."""
    session, transport, _, broker = make_session()
    session.receive_data(b"BOGUS\n\n\x00")
    error_of(transport)
    session.receive_data(frame("CONNECT", ("accept-version", "1.2")))
    assert transport.take() == b""
    assert session.state is State.CLOSING


def test_unknown_command_is_an_error() -> None:
    """An unknown command gets an ERROR that names it."""
    session, transport, _, _ = connected()
    session.receive_data(b"FROB\nreceipt:9\n\n\x00")
    error = error_of(transport)
    assert error.get("message") == "unknown command"
    assert b"FROB" in error.body
    assert error.get("receipt-id") == "9"


def test_second_connect_is_an_error() -> None:
    """A CONNECT on a connected session is an error."""
    session, transport, _, _ = connected()
    session.receive_data(frame("CONNECT", ("accept-version", "1.2")))
    assert error_of(transport).get("message") == "already connected"


@pytest.mark.parametrize(
    "command, headers, missing",
    [
        ("SEND", [], "destination"),
        ("SUBSCRIBE", [("id", "1")], "destination"),
        ("SUBSCRIBE", [("destination", "/topic/a")], "id"),
        ("UNSUBSCRIBE", [], "id"),
    ],
)
def test_missing_required_header_is_an_error(command: str, headers, missing: str) -> None:
    """STOMP 1.2: a frame without a required header gets an ERROR naming the header."""
    session, transport, _, _ = connected()
    session.receive_data(frame(command, *headers, ("receipt", "r7")))
    error = error_of(transport)
    assert error.get("message") == f"missing {missing} header"
    assert error.get("receipt-id") == "r7"


def test_malformed_frame_is_an_error_with_its_reason() -> None:
    """A header line without a colon gets an ERROR saying so."""
    session, transport, _, _ = connected()
    session.receive_data(b"SEND\ndestination:/topic/a\nno colon here\n\n\x00")
    error = error_of(transport)
    assert error.get("message")
    assert "no colon here" in error.get("message", "") + error.body.decode()


def test_frame_over_the_size_limit_is_an_error() -> None:
    """An oversized frame gets an ERROR naming the limit, before it is all read."""
    session, transport, _, broker = connected(config=SessionConfig(max_frame_size=1024))
    session.receive_data(b"SEND\ndestination:/topic/a\n\n" + b"x" * 2000)
    error = error_of(transport)
    assert "too large" in error.get("message", "")
    assert b"1024" in error.body + error.get("message", "").encode()


def test_full_broker_rejects_the_connection() -> None:
    """When the broker refuses a connection, the client gets an ERROR naming the limit."""
    session, transport, _, _ = make_session(broker=RecordingBroker(full=True))
    assert error_of(transport).get("message") == "too many connections"


def test_recording_broker_provides_ibroker() -> None:
    """The fake broker these tests use offers everything a session may ask of a broker."""
    verifyObject(IBroker, RecordingBroker())


def test_frames_split_and_batched_are_all_handled() -> None:
    """Several frames in one chunk, and one frame over many chunks, are handled alike."""
    session, transport, _, _ = make_session()
    stream = (
        frame("CONNECT", ("accept-version", "1.2"))
        + frame("SUBSCRIBE", ("id", "1"), ("destination", "/topic/a"))
        + b"\n\r\n"
        + frame("SEND", ("destination", "/topic/a"), ("receipt", "r"), body=b"hello")
    )
    for index in range(len(stream)):
        session.receive_data(stream[index : index + 1])
    commands = [f.command for f in transport.frames()]
    assert commands == ["CONNECTED", "MESSAGE", "RECEIPT"]


# -- DISCONNECT and losing the connection ------------------------------------


def test_disconnect_sends_receipt_then_closes() -> None:
    """STOMP 1.2, "DISCONNECT": the RECEIPT is written before the connection closes."""
    session, transport, _, broker = connected()
    session.receive_data(frame("SUBSCRIBE", ("id", "1"), ("destination", "/topic/a")))
    session.receive_data(
        frame("DISCONNECT", ("receipt", "bye")) + frame("SEND", ("destination", "/topic/a"))
    )
    assert transport.frames() == [Frame("RECEIPT", (("receipt-id", "bye"),))]
    assert transport.closed
    assert broker.subscribers == []
    assert ("close_connection", session) in broker.calls
    assert not any(call == "send" for call, _ in broker.calls)


def test_connection_lost_releases_subscriptions_once() -> None:
    """A vanished client's subscriptions and registration are dropped, once."""
    session, _, _, broker = connected()
    session.receive_data(frame("SUBSCRIBE", ("id", "1"), ("destination", "/topic/a")))
    session.receive_data(b"SEND\ndestination:/topic/a\n\nhalf a fra")
    session.connection_lost()
    session.connection_lost()
    assert broker.subscribers == []
    assert broker.calls.count(("close_connection", session)) == 1
    assert session.state is State.CLOSED


def test_frame_before_a_malformed_one_in_the_same_chunk_is_acted_on() -> None:
    """
    A SEND that arrived whole is published even when a malformed frame follows it in the same
    read.
    """
    session, transport, _, broker = connected()
    session.receive_data(
        frame("SEND", ("destination", "/topic/a"), body=b"kept") + b"SEND\nno colon here\n\n\x00"
    )
    assert [arg.body for call, arg in broker.calls if call == "send"] == [b"kept"]
    assert "no colon" in error_of(transport).get("message", "")


# -- the state machine --------------------------------------------------------------


def test_every_state_has_handlers_and_transitions() -> None:
    """Both tables cover every state, so a lookup never fails for want of a row."""
    assert set(HANDLERS) == set(State) == set(TRANSITIONS)


def test_every_state_can_lose_its_connection() -> None:
    """A transport may report its connection gone at any moment; the session is then CLOSED."""
    for state in State:
        assert TRANSITIONS[state][Event.CONNECTION_LOST] is State.CLOSED, state


def test_a_session_moves_through_its_states_by_events() -> None:
    """CONNECT with a login pending, its acceptance, DISCONNECT and the loss walk every state."""
    login: Deferred[Any] = Deferred()
    session, transport, _, _ = make_session(
        config=SessionConfig(authenticator=lambda login_, passcode, peer: login)
    )
    assert session.state is State.AWAITING_CONNECT
    session.receive_data(frame("CONNECT", ("accept-version", "1.2"), ("login", "u")))
    assert session.state is State.AUTHENTICATING
    login.callback(Identity("u"))
    assert session.state is State.CONNECTED
    session.receive_data(frame("DISCONNECT"))
    assert session.state is State.CLOSING
    session.connection_lost()
    assert session.state is State.CLOSED


def test_an_event_the_state_does_not_allow_is_a_bug_not_a_client_error() -> None:
    """
    An undefined transition raises SessionStateError, which is no ProtocolError: the client is
    not blamed with an ERROR, and the state stays as it was.
    """
    life = SessionState()
    life.move(Event.LOGIN_ACCEPTED)
    with pytest.raises(SessionStateError, match="LOGIN_STARTED"):
        life.move(Event.LOGIN_STARTED)
    assert not issubclass(SessionStateError, ProtocolError)
    assert life.state is State.CONNECTED


def test_only_the_transition_function_assigns_the_state() -> None:
    """
    In the whole protocol package, ``.state`` is assigned in SessionState.__init__ (the first
    state) and in its move, nowhere else: TRANSITIONS is the only place the state changes.
    """
    assigning = set()
    for path in sorted(Path(session_module.__file__).parent.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for function in ast.walk(tree):
            if not isinstance(function, ast.FunctionDef):
                continue
            for node in ast.walk(function):
                targets = []
                if isinstance(node, ast.Assign):
                    targets = node.targets
                elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
                    targets = [node.target]
                if any(isinstance(t, ast.Attribute) and t.attr == "state" for t in targets):
                    assigning.add((path.name, function.name))
    assert assigning == {("states.py", "__init__"), ("states.py", "move")}


# -- what statistics see -----------------------------------------------------------------


def test_a_new_connection_describes_itself_without_session_or_version() -> None:
    """Before CONNECTED there is no session id, no version and no user; the peer and clock are."""
    session, transport, clock, _ = make_session()
    verifyObject(IConnection, session)
    assert session.describe() == ConnectionDescription(
        session="",
        address="127.0.0.1:5000",
        version=None,
        transport="tcp",
        connected_since=clock.seconds(),
    )


def test_a_connected_session_describes_its_traffic() -> None:
    """Frames and bytes each way, the subscriptions open, the version and the transport's kind."""
    session, transport, _, _ = connected(version="1.1")
    incoming = frame("SUBSCRIBE", ("id", "1"), ("destination", "/topic/a"), ("receipt", "r"))
    session.receive_data(incoming)
    described = session.describe()
    assert (described.session, described.version, described.subscriptions) == ("s1", "1.1", 1)
    assert (described.frames_in, described.frames_out) == (2, 2)
    connect = frame("CONNECT", ("accept-version", "1.1"), ("host", "/"), ("heart-beat", "0,0"))
    assert described.bytes_in == len(connect) + len(incoming)
    assert described.bytes_out == session.output.bytes_sent > 0


@pytest.mark.parametrize(
    "identity, user", [(None, None), (Identity("alice"), "alice"), (ANONYMOUS_IDENTITY, None)]
)
def test_the_user_is_the_login_unless_anonymous(identity: Any, user: str | None) -> None:
    """A client that logged in shows its user name; an anonymous one, or one without login, none."""
    session, _, _, _ = connected()
    session.login.accept(identity)
    assert session.describe().user == user
