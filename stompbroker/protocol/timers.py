"""
A session's clocks: heart-beats both ways, the connect timeout and the frame timeout.

Time comes from the injected clock (``seconds`` and ``callLater``), so these
are tested with ``twisted.internet.task.Clock`` and nothing here imports Twisted.

- Sending (STOMP 1.2, "Heart-beating"): every half of the negotiated send
  interval, an EOL goes out unless something else was written since the last
  check, which keeps the longest silence under one interval.
- Receiving: a client silent for ``heartbeat_grace`` times the negotiated
  receive interval is dead, and gets an ERROR.
- A socket that completes no CONNECT within ``connect_timeout`` (login
  included) is closed; a frame begun must be complete within ``frame_timeout``.
  Each breach is a :class:`~stompbroker.protocol.errors.LimitExceeded` naming
  the limit.
- While the session reads nothing from the client (see :mod:`~stompbroker.protocol.reading`), the
  client's silence is not its fault: the checks wait, and the clocks start
  again when reading does.

The session holds one :class:`Timers`, given the clock, a way to write a
heart-beat, what it reads of the session's reading (:class:`Hearing`) and two
ways to end the session.  The marks of activity the checks read (when the
client was last heard from, whether anything was written since the last beat)
are the reading's and the output's, set on every read and write without a
call to this part.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from stompbroker.protocol.config import SessionConfig
from stompbroker.protocol.errors import LimitExceeded, ProtocolError
from stompbroker.protocol.parts import Clock, Failing, Timer


class Hearing(Protocol):
    """What the heart-beat check reads of the session's reading (a ``ReadPauses``)."""

    @property
    def paused(self) -> bool:
        """Whether the session reads nothing now: the client's silence is not its fault."""

    @property
    def last_heard(self) -> float:
        """When the client was last heard from."""


class Timers:
    """
    The session's timers.

    :param clock: where it reads the time and schedules its checks.
    :param config: the listener's settings (the timeouts, ``heartbeat_grace``).
    :param hearing: when the client was last heard, and whether reading is paused.
    :param beat: writes a heart-beat unless anything else was written since the
        last call (the output's ``beat``).
    :param fail: ends the session with an ERROR (a timeout).
    :param dead: ends the session of a client silent past its heart-beats: the
        network is gone, not the client's wish, so a resumable session waits.
    """

    __slots__ = (
        "frame_started",
        "_clock",
        "_config",
        "_connect_timer",
        "_frame_timer",
        "_heartbeat",
        "_receive_timer",
        "_send_timer",
        "_beat",
        "_dead",
        "_fail",
        "_hearing",
    )

    def __init__(
        self,
        clock: Clock,
        config: SessionConfig,
        hearing: Hearing,
        beat: Callable[[], None],
        fail: Failing,
        dead: Callable[[ProtocolError], None],
    ) -> None:
        self._hearing = hearing
        self._beat = beat
        self._fail = fail
        self._dead = dead
        self._clock = clock
        self._config = config
        #: When the frame now incomplete began, or ``None``.
        self.frame_started: float | None = None
        #: ``(send_ms, receive_ms)``, once heart-beats are started.
        self._heartbeat = (0, 0)
        self._send_timer: Timer | None = None
        self._receive_timer: Timer | None = None
        self._connect_timer: Timer | None = None
        self._frame_timer: Timer | None = None

    def running(self) -> tuple[Timer, ...]:
        """:returns: the timers scheduled now (none once :meth:`stop` is called)."""
        timers = (self._send_timer, self._receive_timer, self._connect_timer, self._frame_timer)
        return tuple(timer for timer in timers if timer is not None)

    def start_connect_timer(self) -> None:
        timeout = self._config.connect_timeout
        if timeout:
            self._connect_timer = self._clock.callLater(timeout, self._connect_timed_out)

    def stop_connect_timer(self) -> None:
        if self._connect_timer is not None:
            self._connect_timer.cancel()
            self._connect_timer = None

    def stop(self) -> None:
        """Cancel every timer; safe to repeat."""
        for timer in self.running():
            if timer.active():
                timer.cancel()
        self._send_timer = self._receive_timer = self._connect_timer = None
        self._frame_timer = None

    def restart_frame_clock(self, now: float) -> None:
        """Reading resumes: a frame begun waited on the session, not on the client."""
        if self.frame_started is not None:
            self.frame_started = now

    # -- heart-beats -----------------------------------------------------------

    def start_heartbeats(self, heartbeat: tuple[int, int]) -> None:
        """:param heartbeat: ``(send_ms, receive_ms)`` negotiated; 0 turns a direction off."""
        self._heartbeat = heartbeat
        send_ms, receive_ms = heartbeat
        if send_ms:
            # Checking twice per interval keeps the longest silence under one interval.
            self._send_timer = self._clock.callLater(send_ms / 2000.0, self._send_beat)
        if receive_ms:
            self._receive_timer = self._clock.callLater(
                receive_ms * self._config.heartbeat_grace / 1000.0, self._check_beat
            )

    def _send_beat(self) -> None:
        self._beat()
        self._send_timer = self._clock.callLater(self._heartbeat[0] / 2000.0, self._send_beat)

    def _check_beat(self) -> None:
        hearing = self._hearing
        allowed = self._heartbeat[1] * self._config.heartbeat_grace / 1000.0
        silent = self._clock.seconds() - hearing.last_heard
        if hearing.paused:
            # We are not reading from the client: its silence is not its fault.
            self._receive_timer = self._clock.callLater(allowed, self._check_beat)
            return
        if silent >= allowed:
            self._receive_timer = None
            self._dead(
                ProtocolError(
                    "heart-beat timeout",
                    f"nothing received for {silent:.1f} s; the negotiated heart-beat is"
                    f" {self._heartbeat[1]} ms",
                )
            )
            return
        self._receive_timer = self._clock.callLater(allowed - silent, self._check_beat)

    # -- timeouts ----------------------------------------------------------------

    def _connect_timed_out(self) -> None:
        self._connect_timer = None
        timeout = self._config.connect_timeout
        self._fail(
            LimitExceeded(
                "connect timeout",
                f"no CONNECT frame was completed within {timeout:g} s of connecting"
                " (connect-timeout)",
            )
        )

    def start_frame_clock(self) -> None:
        """A frame has begun and not ended: it must end within ``frame_timeout``."""
        self.frame_started = self._clock.seconds()
        timeout = self._config.frame_timeout
        if timeout and self._frame_timer is None:
            self._frame_timer = self._clock.callLater(timeout, self._check_frame)

    def frame_ended(self) -> None:
        """No frame is incomplete now."""
        self.frame_started = None

    def _check_frame(self) -> None:
        self._frame_timer = None
        started = self.frame_started
        if started is None:
            return
        timeout = self._config.frame_timeout
        waited = self._clock.seconds() - started
        if self._hearing.paused:
            # We are not reading from the client: it cannot finish its frame.
            self._frame_timer = self._clock.callLater(timeout, self._check_frame)
            return
        if waited < timeout:
            self._frame_timer = self._clock.callLater(timeout - waited, self._check_frame)
            return
        self._fail(
            LimitExceeded(
                "frame timeout",
                f"a frame was begun and not completed within {timeout:g} s (frame-timeout)",
            )
        )
