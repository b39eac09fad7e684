"""
The session's slow-consumer output (stompbroker.protocol.slow_consumer.SlowConsumer)
built alone: a recording transport and broker, a ``task.Clock`` and a stand-in for
the session (:class:`Owner`), without a session.
"""

from __future__ import annotations

from typing import Any

from twisted.internet.task import Clock

from stompbroker.protocol.config import SessionConfig
from stompbroker.protocol.errors import ProtocolError
from stompbroker.protocol.slow_consumer import BY_BACKLOG, SlowConsumer
from stompbroker.protocol.states import Event, State
from tests.support.session import FakeTransport, RecordingBroker


class Owner:
    """A stand-in for the session: the ``SlowConsumerOwner`` a :class:`SlowConsumer` writes for."""

    def __init__(self) -> None:
        self.state = State.CONNECTED
        self.session_id = "s1"
        self.version = "1.2"
        self.peer = "127.0.0.1:1"
        self._read_pauses: frozenset[str] = frozenset()
        self.failed: list[str] = []

    def subscribers(self) -> tuple[Any, ...]:
        return ()

    def _fail(self, error: ProtocolError, event: Event = Event.ERROR) -> None:
        self.failed.append(error.message)

    def _pause_reading(self, reason: str) -> None:
        self._read_pauses = self._read_pauses | {reason}

    def _resume_reading(self, reason: str) -> None:
        self._read_pauses = self._read_pauses - {reason}


def made(**settings: Any) -> tuple[SlowConsumer, Owner, FakeTransport, RecordingBroker, Clock]:
    owner, transport, broker, clock = Owner(), FakeTransport(), RecordingBroker(), Clock()
    output = SlowConsumer(owner, broker, transport, clock, SessionConfig(**settings))
    return output, owner, transport, broker, clock


def test_writes_go_straight_to_the_transport_while_it_keeps_up() -> None:
    output, _, transport, _, _ = made()
    output.write(b"a")
    output.write_message(b"b")
    assert transport.take() == b"ab"
    assert not output.behind()


def test_past_the_grace_writes_wait_and_the_broker_pauses_the_consumers() -> None:
    output, owner, transport, broker, _ = made(write_grace=3)
    output.pause_writing()
    output.write(b"abc")
    assert transport.take() == b"abc"
    output.write(b"d")
    assert transport.take() == b""
    assert output.behind()
    assert broker.named("pause_consumers") == [owner]
    output.resume_writing()
    assert transport.take() == b"d"
    assert not output.behind()
    assert broker.named("resume_consumers") == [owner]


def test_frames_past_the_buffer_stop_reading_until_drained() -> None:
    output, owner, transport, _, _ = made(write_grace=0, slow_consumer_buffer=10)
    output.pause_writing()
    output.write(b"x" * 11)
    assert BY_BACKLOG in owner._read_pauses
    output.resume_writing()
    assert owner._read_pauses == frozenset()
    assert transport.take() == b"x" * 11


def test_the_disconnect_policy_fails_the_session_a_moment_later() -> None:
    output, owner, _, broker, clock = made(
        write_grace=0, slow_consumer_buffer=10, slow_consumer_policy="disconnect"
    )
    output.pause_writing()
    output.write_message(b"m" * 8)
    output.write_message(b"m" * 8)
    assert output.closing is not None
    assert owner.failed == []
    clock.advance(0)
    assert owner.failed == ["slow consumer"]
    output.write_message(b"m")
    assert broker.named("count_dropped")[-1] == (1, False)


def test_stop_cancels_the_close_and_forget_drops_the_backlog() -> None:
    output, owner, transport, _, clock = made(
        write_grace=0, slow_consumer_buffer=10, slow_consumer_policy="disconnect"
    )
    output.pause_writing()
    output.write_message(b"m" * 8)
    output.write_message(b"m" * 8)
    output.stop()
    assert output.closing is None
    clock.advance(0)
    assert owner.failed == []
    output.forget()
    output.flush()
    assert transport.take() == b""


class PolicyBroker(RecordingBroker):
    """A broker whose policies give the connection drop-oldest past 10 bytes."""

    def slow_consumer(self, destinations: Any, policy: str, buffer: int) -> tuple[str, int]:
        self.calls.append(("slow_consumer", (list(destinations), policy, buffer)))
        return "drop-oldest", 10


class Subscribed(Owner):
    def subscribers(self) -> tuple[Any, ...]:
        return (Subscription("/topic/feeds.a"),)


class Subscription:
    """A subscription the advisory looks up, for no message of this test."""

    def __init__(self, destination: str) -> None:
        self.destination = destination
        self.prefix = b"MESSAGE\nsubscription:other"


def test_the_policies_of_its_topic_subscriptions_decide_as_it_falls_behind() -> None:
    owner, transport, broker, clock = Subscribed(), FakeTransport(), PolicyBroker(), Clock()
    config = SessionConfig(
        write_grace=0, slow_consumer_buffer=1000, slow_consumer_policy="disconnect"
    )
    output = SlowConsumer(owner, broker, transport, clock, config)
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
    assert owner.failed == []
