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
- While the session reads nothing from the client (see ``_read_pauses``), the
  client's silence is not its fault: the checks wait, and the clocks start
  again when reading does.

The session holds one :class:`Timers`; what it needs of the session is
:class:`TimersOwner`.  The marks of activity the checks read (when the client
was last heard from, whether anything was written since the last beat) are
the session's and its output's, set on every read and write without a call
to this part.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from stompbroker.protocol.config import SessionConfig
from stompbroker.protocol.errors import LimitExceeded, ProtocolError
from stompbroker.protocol.parts import Clock, Failing, Timer

if TYPE_CHECKING:
    from stompbroker.protocol.resume.part import Resume
    from stompbroker.protocol.slow_consumer import SlowConsumer


class TimersOwner(Failing, Protocol):
    """What :class:`Timers` needs of the session it keeps time for."""

    @property
    def _last_received(self) -> float:
        """When the client was last heard from."""

    @property
    def _read_pauses(self) -> frozenset[str]: ...

    @property
    def output(self) -> SlowConsumer:
        """Writes a heart-beat unless anything else was written since the last one (``beat``)."""

    @property
    def resume(self) -> Resume:
        """Detached when the client is silent: the network is gone, not the client's wish."""


class Timers:
    """
    The session's timers.

    :param session: what it keeps time for (:class:`TimersOwner`).
    :param clock: where it reads the time and schedules its checks.
    :param config: the listener's settings (the timeouts, ``heartbeat_grace``).
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
        "_session",
    )

    def __init__(self, session: TimersOwner, clock: Clock, config: SessionConfig) -> None:
        self._session = session
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
        self._session.output.beat()
        self._send_timer = self._clock.callLater(self._heartbeat[0] / 2000.0, self._send_beat)

    def _check_beat(self) -> None:
        session = self._session
        allowed = self._heartbeat[1] * self._config.heartbeat_grace / 1000.0
        silent = self._clock.seconds() - session._last_received
        if session._read_pauses:
            # We are not reading from the client: its silence is not its fault.
            self._receive_timer = self._clock.callLater(allowed, self._check_beat)
            return
        if silent >= allowed:
            self._receive_timer = None
            # The network is gone, not the client's wish: a resumable session waits for it.
            session.resume.detach()
            session._fail(
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
        self._session._fail(
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
        if self._session._read_pauses:
            # We are not reading from the client: it cannot finish its frame.
            self._frame_timer = self._clock.callLater(timeout, self._check_frame)
            return
        if waited < timeout:
            self._frame_timer = self._clock.callLater(timeout - waited, self._check_frame)
            return
        self._session._fail(
            LimitExceeded(
                "frame timeout",
                f"a frame was begun and not completed within {timeout:g} s (frame-timeout)",
            )
        )
