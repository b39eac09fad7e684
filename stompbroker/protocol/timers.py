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
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from stompbroker.protocol.errors import LimitExceeded, ProtocolError
from stompbroker.protocol.parts import SessionPart

#: One heart-beat: an EOL, which every version's parser skips between frames.
HEARTBEAT = b"\n"


class TimersMixin(SessionPart):
    """
    The session's timers.  Mixed into
    :class:`~stompbroker.protocol.session.StompSession`, whose slots hold its
    state (:data:`SLOTS`): the marks of activity that the timers read are set
    on every read and write, where a call to another object would cost.
    """

    __slots__ = ()

    #: The session's slots this part owns.
    SLOTS: tuple[str, ...] = (
        "_send_timer",
        "_receive_timer",
        "_connect_timer",
        "_frame_timer",
        "_frame_started",
        "_last_received",
        "_wrote",
    )

    _send_timer: Any
    _receive_timer: Any
    _connect_timer: Any
    _frame_timer: Any
    _frame_started: float | None
    _last_received: float
    _wrote: bool
    # Of the session's other parts.
    heartbeat: tuple[int, int]
    _transport_write: Callable[[bytes], None]
    _behind: Callable[[], bool]
    _detach: Callable[[], None]

    def _init_timers(self, now: float) -> None:
        """:param now: when the connection was made."""
        #: Whether anything was written since the last heart-beat check.
        self._wrote = False
        #: When the client was last heard from.
        self._last_received = now
        #: When the frame now incomplete began, or ``None``.
        self._frame_started = None
        self._send_timer = self._receive_timer = None
        self._connect_timer = self._frame_timer = None

    def _start_connect_timer(self) -> None:
        timeout = self.config.connect_timeout
        if timeout:
            self._connect_timer = self._clock.callLater(timeout, self._connect_timed_out)

    def _stop_connect_timer(self) -> None:
        if self._connect_timer is not None:
            self._connect_timer.cancel()
            self._connect_timer = None

    def _stop_timers(self) -> None:
        """Cancel every timer; safe to repeat."""
        timers = (self._send_timer, self._receive_timer, self._connect_timer, self._frame_timer)
        for timer in timers:
            if timer is not None and timer.active():
                timer.cancel()
        self._send_timer = self._receive_timer = self._connect_timer = None
        self._frame_timer = None

    def _restart_clocks(self) -> None:
        """Reading resumes: silence while the session did not read is not the client's."""
        now = self._clock.seconds()
        self._last_received = now
        if self._frame_started is not None:
            self._frame_started = now

    # -- heart-beats -----------------------------------------------------------

    def _start_heartbeats(self) -> None:
        send_ms, receive_ms = self.heartbeat
        if send_ms:
            # Checking twice per interval keeps the longest silence under one interval.
            self._send_timer = self._clock.callLater(send_ms / 2000.0, self._send_beat)
        if receive_ms:
            self._receive_timer = self._clock.callLater(
                receive_ms * self.config.heartbeat_grace / 1000.0, self._check_beat
            )

    def _send_beat(self) -> None:
        if not self._wrote and not self._behind():
            self._transport_write(HEARTBEAT)
        self._wrote = False
        self._send_timer = self._clock.callLater(self.heartbeat[0] / 2000.0, self._send_beat)

    def _check_beat(self) -> None:
        allowed = self.heartbeat[1] * self.config.heartbeat_grace / 1000.0
        silent = self._clock.seconds() - self._last_received
        if self._read_pauses:
            # We are not reading from the client: its silence is not its fault.
            self._receive_timer = self._clock.callLater(allowed, self._check_beat)
            return
        if silent >= allowed:
            self._receive_timer = None
            # The network is gone, not the client's wish: a resumable session waits for it.
            self._detach()
            self._fail(
                ProtocolError(
                    "heart-beat timeout",
                    f"nothing received for {silent:.1f} s; the negotiated heart-beat is"
                    f" {self.heartbeat[1]} ms",
                )
            )
            return
        self._receive_timer = self._clock.callLater(allowed - silent, self._check_beat)

    # -- timeouts ----------------------------------------------------------------

    def _connect_timed_out(self) -> None:
        self._connect_timer = None
        timeout = self.config.connect_timeout
        self._fail(
            LimitExceeded(
                "connect timeout",
                f"no CONNECT frame was completed within {timeout:g} s of connecting"
                " (connect-timeout)",
            )
        )

    def _start_frame_clock(self) -> None:
        self._frame_started = self._clock.seconds()
        timeout = self.config.frame_timeout
        if timeout and self._frame_timer is None:
            self._frame_timer = self._clock.callLater(timeout, self._check_frame)

    def _check_frame(self) -> None:
        self._frame_timer = None
        started = self._frame_started
        if started is None:
            return
        timeout = self.config.frame_timeout
        waited = self._clock.seconds() - started
        if self._read_pauses:
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
