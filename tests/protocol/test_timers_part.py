"""
The session's timers part (stompbroker.protocol.timers.Timers) built alone on a
``task.Clock`` and a stand-in for the session (:class:`Owner`), without a session.
"""

from __future__ import annotations

from twisted.internet.task import Clock

from stompbroker.protocol.config import SessionConfig
from stompbroker.protocol.errors import ProtocolError
from stompbroker.protocol.states import Event, State
from stompbroker.protocol.timers import Timers


class Owner:
    """A stand-in for the session: the ``TimersOwner`` a :class:`Timers` keeps time for."""

    def __init__(self) -> None:
        self.state = State.CONNECTED
        self._last_received = 0.0
        self._read_pauses: frozenset[str] = frozenset()
        self.beats = 0
        self.detached = 0
        self.failed: list[str] = []

    @property
    def output(self) -> Owner:
        """The output part stand-in is the owner itself: it counts heart-beats."""
        return self

    def beat(self) -> None:
        self.beats += 1

    @property
    def resume(self) -> Owner:
        """The resume part stand-in is the owner itself: it counts detaches."""
        return self

    def detach(self) -> None:
        self.detached += 1

    def _fail(self, error: ProtocolError, event: Event = Event.ERROR) -> None:
        self.failed.append(error.message)


def made(**settings: object) -> tuple[Timers, Owner, Clock]:
    clock = Clock()
    owner = Owner()
    return Timers(owner, clock, SessionConfig(**settings)), owner, clock  # type: ignore[arg-type]


def test_the_send_beat_is_checked_twice_per_interval() -> None:
    timers, owner, clock = made()
    timers.start_heartbeats((1000, 0))
    clock.advance(0.5)
    clock.advance(0.5)
    assert owner.beats == 2
    assert len(timers.running()) == 1


def test_a_silent_client_is_detached_then_failed_after_the_grace() -> None:
    timers, owner, clock = made(heartbeat_grace=2.0)
    timers.start_heartbeats((0, 1000))
    clock.advance(1.5)
    owner._last_received = 1.5
    clock.advance(0.5)
    assert owner.failed == []
    clock.advance(1.4)
    assert owner.failed == []
    clock.advance(0.1)
    assert (owner.detached, owner.failed) == (1, ["heart-beat timeout"])


def test_silence_while_reading_is_paused_is_not_the_clients() -> None:
    timers, owner, clock = made(heartbeat_grace=1.0)
    timers.start_heartbeats((0, 1000))
    owner._read_pauses = frozenset({"window"})
    clock.advance(5)
    assert owner.failed == []


def test_the_connect_timeout_fails_unless_stopped() -> None:
    timers, owner, clock = made(connect_timeout=3.0)
    timers.start_connect_timer()
    timers.stop_connect_timer()
    clock.advance(5)
    assert owner.failed == []
    timers.start_connect_timer()
    clock.advance(3)
    assert owner.failed == ["connect timeout"]


def test_a_frame_begun_must_end_within_the_frame_timeout() -> None:
    timers, owner, clock = made(frame_timeout=2.0)
    timers.start_frame_clock()
    clock.advance(1)
    timers.frame_ended()
    clock.advance(5)
    assert owner.failed == []
    timers.start_frame_clock()
    clock.advance(1)
    timers.restart_frame_clock(clock.seconds())
    clock.advance(1.5)
    assert owner.failed == []
    clock.advance(0.5)
    assert owner.failed == ["frame timeout"]


def test_stop_cancels_every_timer() -> None:
    timers, owner, clock = made(connect_timeout=3.0, frame_timeout=2.0)
    timers.start_connect_timer()
    timers.start_heartbeats((1000, 1000))
    timers.start_frame_clock()
    assert len(timers.running()) == 4
    timers.stop()
    assert timers.running() == ()
    clock.advance(10)
    assert (owner.beats, owner.failed) == (0, [])
