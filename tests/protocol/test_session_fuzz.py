"""
Hostile input for :class:`~stompbroker.protocol.session.StompSession`: a Hypothesis state
machine feeds sessions valid, broken and random frames, cut anywhere, while time
passes, logins are checked, sockets fill and drain, and connections drop.

What it proves, after every step:

- no input makes an exception escape the session (any would fail the step);
- a session that ended because of the client got an ERROR as its last frame,
  and its transport was closed (STOMP 1.2, "ERROR");
- an ended session leaks nothing: the broker has no record of it or of its
  subscriptions, and it holds no timer and no pending login;
- another session on the same broker is unaffected: a witness subscribed to
  ``/topic/w`` gets, in order, every message a well-behaved publisher sends there.

At the end every session still open is dropped, and then no timer may be left.
The sessions run against the recording broker of ``test_session``, with small
limits so that the inputs reach them, and with a real portal and access policy.
"""

from __future__ import annotations

from typing import Any

from hypothesis import event, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule
from twisted.cred import strcred
from twisted.internet.task import Clock

from stompbroker.protocol.config import SLOW_CONSUMER_POLICIES
from stompbroker.protocol.frames import CLIENT_COMMANDS, Frame
from stompbroker.protocol.parser import FrameParser
from stompbroker.protocol.session import SessionConfig, State, StompSession
from stompbroker.security.access_file import AccessControl, parse_policy
from stompbroker.security.portal import Authenticator, make_portal
from tests.support.session import FakeTransport, RecordingBroker

RULES = """
[anonymous]
read = ["/topic/#"]
write = ["/topic/a"]

[users.alice]
read = ["/topic/#", "/queue/#"]
write = ["/topic/#", "/queue/#"]
"""

#: Every client command, and some that are not.
COMMANDS = st.sampled_from(sorted(CLIENT_COMMANDS) + ["MESSAGE", "send", "BOGUS", ""])
NAMES = st.sampled_from(
    [
        "destination",
        "id",
        "ack",
        "receipt",
        "transaction",
        "accept-version",
        "heart-beat",
        "login",
        "passcode",
        "content-length",
        "prefetch-count",
        "reply-to",
        "subscription",
        "message-id",
        "durable",
        "activemq.subscriptionName",
        "client-id",
        "requeue",
        "expires",
    ]
) | st.text("abc-:\\\r\n", max_size=6)
VALUES = st.sampled_from(
    [
        "/topic/a",
        "/topic/w",
        "/queue/q",
        "/topic/#",
        "/temp-queue/t",
        "1.2",
        "1.0,1.1",
        "0,0",
        "100,50",
        "alice",
        "secret",
        "wrong",
        "client",
        "auto",
        "client-individual",
        "t1",
        "1",
        "3",
        "-1",
        "true",
        "99999999",
    ]
) | st.text("ab\\c:/\r\n\x00é", max_size=8)
EOLS = st.sampled_from([b"\n", b"\r\n"])


@st.composite
def frames(draw: Any) -> bytes:
    """A frame, well formed or not: any command, any headers, a body, a NUL or none."""
    eol = draw(EOLS)
    command = draw(COMMANDS).encode()
    headers = draw(st.lists(st.tuples(NAMES, VALUES), max_size=6))
    lines = [command] + [f"{name}:{value}".encode() for name, value in headers]
    body = draw(st.binary(max_size=40))
    end = draw(st.sampled_from([b"\x00", b"\x00", b"\x00\n", b""]))
    return eol.join(lines) + eol + eol + body + end


CONNECTS = st.builds(
    lambda version, login, beat: (
        f"CONNECT\naccept-version:{version}\nhost:/\nheart-beat:{beat}\n{login}\n\x00".encode()
    ),
    st.sampled_from(["1.2", "1.1", "1.0", "1.1,1.2", "2.0"]),
    st.sampled_from(["", "login:alice\npasscode:secret", "login:alice\npasscode:nope"]),
    st.sampled_from(["0,0", "100,100", "0,50", "x"]),
)
DESTINATIONS = st.sampled_from(
    ["/topic/a", "/topic/w", "/topic/#", "/queue/q", "/temp-queue/t", "/topic/a.*", "/bad"]
)
SMALL = st.sampled_from(["1", "2", "3", "4"])
OPTIONAL_RECEIPT = st.sampled_from(["", "receipt:r\n"])
#: Frames a real client would send, with the headers their commands need.
VALID = st.one_of(
    st.builds(
        "SUBSCRIBE\nid:{}\ndestination:{}\nack:{}\n{}\n\x00".format,
        SMALL,
        DESTINATIONS,
        st.sampled_from(["auto", "client", "client-individual"]),
        OPTIONAL_RECEIPT,
    ),
    st.builds(
        "SEND\ndestination:{}\n{}{}\n{}\x00".format,
        DESTINATIONS,
        st.sampled_from(["", "transaction:t1\n", "reply-to:/temp-queue/t\n"]),
        OPTIONAL_RECEIPT,
        st.text("xyz", max_size=20),
    ),
    st.builds("UNSUBSCRIBE\nid:{}\n{}\n\x00".format, SMALL, OPTIONAL_RECEIPT),
    st.builds("{}\nid:{}.{}\n\n\x00".format, st.sampled_from(["ACK", "NACK"]), SMALL, SMALL),
    st.builds(
        "{}\ntransaction:t{}\n\n\x00".format, st.sampled_from(["BEGIN", "COMMIT", "ABORT"]), SMALL
    ),
    st.just("DISCONNECT\nreceipt:bye\n\n\x00"),
).map(str.encode)
STREAMS = st.one_of(
    VALID,
    VALID,
    frames(),
    CONNECTS,
    st.binary(max_size=60),
    st.lists(st.one_of(VALID, frames()), min_size=2, max_size=4).map(b"".join),
)


class SessionMachine(RuleBasedStateMachine):
    """Sessions under attack, a witness that must not notice, and a clock."""

    def __init__(self) -> None:
        super().__init__()
        self.clock = Clock()
        self.broker = RecordingBroker()
        self.sessions: list[tuple[StompSession, FakeTransport]] = []
        #: Sessions this machine dropped itself, which owe nobody an ERROR.
        self.dropped: set[int] = set()
        self.published = 0
        self.config = SessionConfig()
        self.witness, self.witness_transport = self._start(SessionConfig(heartbeat=(0, 0)))
        self.witness.receive_data(b"CONNECT\naccept-version:1.2\n\n\x00")
        self.witness.receive_data(b"SUBSCRIBE\nid:w\ndestination:/topic/w\n\n\x00")
        self.publisher, _ = self._start(SessionConfig(heartbeat=(0, 0)))
        self.publisher.receive_data(b"CONNECT\naccept-version:1.2\n\n\x00")
        self.witness_transport.take()

    def _start(self, config: SessionConfig) -> tuple[StompSession, FakeTransport]:
        transport = FakeTransport()
        session = StompSession(self.broker, transport, self.clock, config, peer="127.0.0.1:1")
        session.connection_made()
        return session, transport

    @initialize(
        policy=st.sampled_from(SLOW_CONSUMER_POLICIES),
        secured=st.booleans(),
        buffer=st.integers(1, 400),
        grace=st.sampled_from([0, 0, 150]),
    )
    def configure(self, policy: str, secured: bool, buffer: int, grace: int) -> None:
        authenticator: Authenticator | None = None
        access: AccessControl | None = None
        if secured:
            checker = strcred.makeChecker("memory:alice:secret")
            authenticator = Authenticator(make_portal([checker], True), self.clock, 0.5)
            access = AccessControl()
            access.policy = parse_policy(RULES)
        self.config = SessionConfig(
            heartbeat=(100, 100),
            max_frame_size=300,
            max_headers=6,
            max_header_length=60,
            max_subscriptions=3,
            connect_timeout=5,
            frame_timeout=3,
            slow_consumer_policy=policy,
            slow_consumer_buffer=buffer,
            write_grace=grace,
            authenticator=authenticator,
            access=access,
        )
        self.open_session()

    @rule()
    def open_session(self) -> None:
        self.sessions.append(self._start(self.config))

    @rule(
        login=st.sampled_from(["", "login:alice\npasscode:secret\n", "login:alice\npasscode:no\n"]),
        beat=st.sampled_from(["0,0", "100,100"]),
    )
    def open_connected_session(self, login: str, beat: str) -> None:
        session, transport = self._start(self.config)
        self.sessions.append((session, transport))
        session.receive_data(
            f"CONNECT\naccept-version:1.2\nheart-beat:{beat}\n{login}\n\x00".encode()
        )

    @precondition(lambda self: self.sessions)
    @rule(index=st.integers(0, 7), data=STREAMS, cuts=st.lists(st.integers(0, 80), max_size=3))
    def feed(self, index: int, data: bytes, cuts: list[int]) -> None:
        session, _ = self.sessions[index % len(self.sessions)]
        start = 0
        for cut in sorted(cuts) + [len(data)]:
            session.receive_data(data[start:cut])
            start = max(start, cut)

    @precondition(lambda self: self.sessions)
    @rule(index=st.integers(0, 7), ack=st.sampled_from(["auto", "client"]), burst=st.integers(0, 8))
    def listens_to_the_witness_topic(self, index: int, ack: str, burst: int) -> None:
        """A session subscribes beside the witness; with a burst, its socket is full for it."""
        session, _ = self.sessions[index % len(self.sessions)]
        session.receive_data(
            f"SUBSCRIBE\nid:w{ack}\ndestination:/topic/w\nack:{ack}\n\n\x00".encode()
        )
        if burst:
            session.pause_writing()
            self.witness_publisher_sends(burst)

    @precondition(lambda self: self.sessions)
    @rule(index=st.integers(0, 7))
    def socket_fills(self, index: int) -> None:
        self.sessions[index % len(self.sessions)][0].pause_writing()

    @precondition(lambda self: self.sessions)
    @rule(index=st.integers(0, 7))
    def socket_drains(self, index: int) -> None:
        self.sessions[index % len(self.sessions)][0].resume_writing()

    @precondition(lambda self: self.sessions)
    @rule(index=st.integers(0, 7))
    def connection_drops(self, index: int) -> None:
        session, _ = self.sessions[index % len(self.sessions)]
        if session.state is not State.CLOSED:
            self.dropped.add(id(session))
        session.connection_lost()

    @rule(seconds=st.sampled_from([0, 0.05, 0.3, 1, 4]))
    def time_passes(self, seconds: float) -> None:
        self.clock.advance(seconds)

    @rule(count=st.integers(1, 8))
    def witness_publisher_sends(self, count: int) -> None:
        for _ in range(count):
            self.published += 1
            body = f"witnessed-{self.published}".encode()
            self.publisher.receive_data(b"SEND\ndestination:/topic/w\n\n" + body + b"\x00")

    @invariant()
    def witness_is_unaffected(self) -> None:
        assert self.witness.state is State.CONNECTED
        assert self.publisher.state is State.CONNECTED
        parser = FrameParser()
        received = [
            frame.body
            for frame in parser.receive_data(self.witness_transport.data)
            if frame.body.startswith(b"witnessed-")
        ]
        assert received == [f"witnessed-{n}".encode() for n in range(1, self.published + 1)]

    @invariant()
    def ended_sessions_said_why_and_leak_nothing(self) -> None:
        for session, transport in self.sessions:
            if session.state is State.CONNECTED or session.state is State.AWAITING_CONNECT:
                continue
            if session.state is State.AUTHENTICATING:
                continue
            assert session not in self.broker.connections
            assert all(sub.connection is not session for sub in self.broker.subscribers)
            assert session.timers.running() == ()
            timers = (
                session.output.closing,
                session.login.waiting,
            )
            assert timers == (None,) * 2
            if id(session) in self.dropped:
                continue
            assert transport.closed
            if session.error is not None:
                assert last_command(transport) == "ERROR"

    def teardown(self) -> None:
        for session, _ in self.sessions:
            # What the inputs reached, for --hypothesis-show-statistics.
            event(f"ended by {session.error.message}" if session.error else str(session.state))
            session.connection_lost()
        for call in ("count_dropped", "block_sender", "pause_consumers", "subscribe", "send"):
            if self.broker.named(call):
                event(f"broker asked to {call}")
        for session in (self.witness, self.publisher):
            session.connection_lost()
        assert self.clock.getDelayedCalls() == []
        assert self.broker.connections == set()
        assert self.broker.subscribers == []


def last_command(transport: FakeTransport) -> str:
    """:returns: the command of the last frame written, read without unescaping."""
    parser = FrameParser(max_frame_size=1 << 20)
    parser.version = "1.0"
    written: list[Frame] = parser.receive_data(bytes(transport.data))
    return written[-1].command if written else ""


SessionMachine.TestCase.settings = settings(
    settings.get_profile("ci"), max_examples=200, stateful_step_count=40
)
#: Hostile input never escapes, never leaks, and never reaches another client.
test_session_under_hostile_input = SessionMachine.TestCase
