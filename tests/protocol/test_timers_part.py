"""
The session's timers part (stompbroker.protocol.timers.Timers) built alone on a
``task.Clock``, a real ``ReadPauses`` and callables that record beats and ERRORs,
without a session or a stand-in for one.
"""

from __future__ import annotations

from twisted.internet.task import Clock

from stompbroker.protocol.config import SessionConfig
from stompbroker.protocol.errors import ProtocolError
from stompbroker.protocol.reading import ReadPauses
from stompbroker.protocol.timers import Timers
from tests.support.parts import Failures, reading


class Made:
    """A :class:`Timers` and what it was given."""

    def __init__(self, **settings: object) -> None:
        self.clock = Clock()
        self.reading: ReadPauses = reading(self.clock)[0]
        self.beats = 0
        self.failures = Failures()
        self.dead: list[str] = []
        self.timers = Timers(
            self.clock,
            SessionConfig(**settings),  # type: ignore[arg-type]
            self.reading,
            self.beat,
            self.failures,
            self.died,
        )

    def beat(self) -> None:
        self.beats += 1

    def died(self, error: ProtocolError) -> None:
        self.dead.append(error.message)


def test_the_send_beat_is_checked_twice_per_interval() -> None:
    made = Made()
    made.timers.start_heartbeats((1000, 0))
    made.clock.advance(0.5)
    made.clock.advance(0.5)
    assert made.beats == 2
    assert len(made.timers.running()) == 1


def test_a_silent_client_is_dead_after_the_grace() -> None:
    made = Made(heartbeat_grace=2.0)
    made.timers.start_heartbeats((0, 1000))
    made.clock.advance(1.5)
    made.reading.heard(1.5)
    made.clock.advance(0.5)
    assert made.dead == []
    made.clock.advance(1.4)
    assert made.dead == []
    made.clock.advance(0.1)
    assert made.dead == ["heart-beat timeout"]
    assert made.failures.errors == []


def test_silence_while_reading_is_paused_is_not_the_clients() -> None:
    made = Made(heartbeat_grace=1.0)
    made.timers.start_heartbeats((0, 1000))
    made.reading.pause("window")
    made.clock.advance(5)
    assert made.dead == []
    made.reading.resume("window")
    made.clock.advance(0.9)
    assert made.dead == []


def test_the_connect_timeout_fails_unless_stopped() -> None:
    made = Made(connect_timeout=3.0)
    made.timers.start_connect_timer()
    made.timers.stop_connect_timer()
    made.clock.advance(5)
    assert made.failures.errors == []
    made.timers.start_connect_timer()
    made.clock.advance(3)
    assert made.failures.messages == ["connect timeout"]


def test_a_frame_begun_must_end_within_the_frame_timeout() -> None:
    made = Made(frame_timeout=2.0)
    timers, clock = made.timers, made.clock
    timers.start_frame_clock()
    clock.advance(1)
    timers.frame_ended()
    clock.advance(5)
    assert made.failures.errors == []
    timers.start_frame_clock()
    clock.advance(1)
    timers.restart_frame_clock(clock.seconds())
    clock.advance(1.5)
    assert made.failures.errors == []
    clock.advance(0.5)
    assert made.failures.messages == ["frame timeout"]


def test_stop_cancels_every_timer() -> None:
    made = Made(connect_timeout=3.0, frame_timeout=2.0)
    timers = made.timers
    timers.start_connect_timer()
    timers.start_heartbeats((1000, 1000))
    timers.start_frame_clock()
    assert len(timers.running()) == 4
    timers.stop()
    assert timers.running() == ()
    made.clock.advance(10)
    assert (made.beats, made.failures.errors, made.dead) == (0, [], [])
