"""
The session's slow-consumer output (stompbroker.protocol.slow_consumer.SlowConsumer)
built alone: a recording transport and broker, a ``task.Clock``, the broker's
view of a connection, a real ``SessionState`` and ``ReadPauses``, and a recorder of
ERRORs, without a session or a stand-in for one.
"""

from __future__ import annotations

from typing import Any

from twisted.internet.task import Clock

from stompbroker.protocol.config import SessionConfig
from stompbroker.protocol.slow_consumer import BY_BACKLOG, SlowConsumer
from tests.support.broker import FakeConnection
from tests.support.parts import Failures, reading
from tests.support.session import FakeTransport, RecordingBroker


class Made:
    """A :class:`SlowConsumer` and what it was given, each real or recording."""

    def __init__(self, broker: RecordingBroker | None = None, **settings: Any) -> None:
        self.connection = FakeConnection("s1")
        self.transport = FakeTransport()
        self.broker = broker or RecordingBroker()
        self.clock = Clock()
        self.failures = Failures()
        self.reading, self.socket = reading(self.clock)
        self.output = SlowConsumer(
            self.connection,
            self.connection.subscribers,
            self.connection.describe,
            self.broker,
            self.transport,
            self.clock,
            SessionConfig(**settings),
            self.failures.life,
            self.reading,
            self.failures,
        )


def made(**settings: Any) -> tuple[SlowConsumer, Made, FakeTransport, RecordingBroker, Clock]:
    parts = Made(**settings)
    return parts.output, parts, parts.transport, parts.broker, parts.clock


def test_writes_go_straight_to_the_transport_while_it_keeps_up() -> None:
    output, _, transport, _, _ = made()
    output.write(b"a")
    output.write_message(b"b")
    assert transport.take() == b"ab"
    assert not output.behind()


def test_past_the_grace_writes_wait_and_the_broker_pauses_the_consumers() -> None:
    output, parts, transport, broker, _ = made(write_grace=3)
    output.pause_writing()
    output.write(b"abc")
    assert transport.take() == b"abc"
    output.write(b"d")
    assert transport.take() == b""
    assert output.behind()
    assert broker.named("pause_consumers") == [parts.connection]
    output.resume_writing()
    assert transport.take() == b"d"
    assert not output.behind()
    assert broker.named("resume_consumers") == [parts.connection]


def test_frames_past_the_buffer_stop_reading_until_drained() -> None:
    output, parts, transport, _, _ = made(write_grace=0, slow_consumer_buffer=10)
    output.pause_writing()
    output.write(b"x" * 11)
    assert BY_BACKLOG in parts.reading.reasons
    assert not parts.socket.reading
    output.resume_writing()
    assert parts.reading.reasons == frozenset()
    assert parts.socket.reading
    assert transport.take() == b"x" * 11


def test_the_disconnect_policy_fails_the_session_a_moment_later() -> None:
    output, parts, _, broker, clock = made(
        write_grace=0, slow_consumer_buffer=10, slow_consumer_policy="disconnect"
    )
    output.pause_writing()
    output.write_message(b"m" * 8)
    output.write_message(b"m" * 8)
    assert output.closing is not None
    assert parts.failures.messages == []
    clock.advance(0)
    assert parts.failures.messages == ["slow consumer"]
    output.write_message(b"m")
    assert broker.named("count_dropped")[-1] == (1, False)


def test_stop_cancels_the_close_and_forget_drops_the_backlog() -> None:
    output, parts, transport, _, clock = made(
        write_grace=0, slow_consumer_buffer=10, slow_consumer_policy="disconnect"
    )
    output.pause_writing()
    output.write_message(b"m" * 8)
    output.write_message(b"m" * 8)
    output.stop()
    assert output.closing is None
    clock.advance(0)
    assert parts.failures.messages == []
    output.forget()
    output.flush()
    assert transport.take() == b""


class PolicyBroker(RecordingBroker):
    """A broker whose policies give the connection drop-oldest past 10 bytes."""

    def slow_consumer(self, destinations: Any, policy: str, buffer: int) -> tuple[str, int]:
        self.calls.append(("slow_consumer", (list(destinations), policy, buffer)))
        return "drop-oldest", 10


class Subscription:
    """A subscription the advisory looks up, for no message of this test."""

    def __init__(self, destination: str) -> None:
        self.destination = destination
        self.prefix = b"MESSAGE\nsubscription:other"


def test_the_policies_of_its_topic_subscriptions_decide_as_it_falls_behind() -> None:
    output, parts, _, broker, clock = made(
        broker=PolicyBroker(),
        write_grace=0,
        slow_consumer_buffer=1000,
        slow_consumer_policy="disconnect",
    )
    parts.connection.subscriptions["a"] = Subscription("/topic/feeds.a")
    output.write_message(b"m" * 8)
    assert broker.named("slow_consumer") == []
    output.pause_writing()
    assert broker.named("slow_consumer") == [(["/topic/feeds.a"], "disconnect", 1000)]
    for _ in range(3):
        output.write_message(b"m" * 8)
    # Past the policy's 10 bytes (not the listener's 1000): dropped, not disconnected.
    assert broker.named("count_dropped") == [(1, False), (1, False)]
    assert output.closing is None
    clock.advance(0)
    assert parts.failures.messages == []
