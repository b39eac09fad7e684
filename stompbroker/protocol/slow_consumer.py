"""
What a session does for a client that does not read as fast as it is written to.

Theory of operation: when the transport's buffer is full it tells the session
(:meth:`SlowConsumerMixin.pause_writing`).  After a grace that absorbs bursts of
fan-out (``write_grace``), and until the transport has drained
(:meth:`SlowConsumerMixin.resume_writing`), writes go to the session's
:class:`~stompbroker.protocol.backlog.Backlog` and the broker gives its queue
subscriptions nothing.  ``auto``-ack topic messages are the only ones that keep
coming; when they fill ``slow_consumer_buffer``, the ``slow_consumer_policy``
decides: ``block`` the publishers, ``drop-oldest``, or ``disconnect``.  One
message alone is never too many, however large: a message larger than the
buffer waits whole for a client that keeps reading, and the policy acts only
once another one waits behind it (``drop-oldest`` never drops the newest).  Before
the policy applies, once per episode, the client and the operators are warned
(:mod:`~stompbroker.protocol.advisory`).  Other
frames that fill as much (the client sends frames whose answers it does not
read) stop the session from reading.

The switch is made by rebinding the session's two write functions
(``_transport_write`` for every frame, ``_message_write`` for auto-ack topic
messages) to this module's methods and back, so a delivery to a client that
keeps up costs nothing more than the transport's own ``write``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from stompbroker.protocol.advisory import (
    ADVISORY_SHARE,
    SLOW_CONSUMER_TOPIC,
    slow_consumer_headers,
    slow_consumer_message,
    slow_consumer_text,
)
from stompbroker.protocol.backlog import Backlog
from stompbroker.protocol.config import BLOCK, DROP_OLDEST
from stompbroker.protocol.errors import LimitExceeded
from stompbroker.protocol.parts import SessionPart
from stompbroker.protocol.states import State

#: Why a session has stopped reading: what waits for the client fills the buffer.
BY_BACKLOG = "backlog"


class SlowConsumerMixin(SessionPart):
    """
    The session's writing to a client that may fall behind.  Mixed into
    :class:`~stompbroker.protocol.session.StompSession`, whose slots hold its
    state (:data:`SLOTS`), so that a write costs no call between objects.
    """

    __slots__ = ()

    #: The session's slots this part owns.
    SLOTS: tuple[str, ...] = ("_backlog", "_transport_write", "_message_write", "_advisories")

    _backlog: Backlog | None
    _transport_write: Callable[[bytes], None]
    _message_write: Callable[[bytes], None]
    #: How many advisories this session was sent, to number their message ids.
    _advisories: int
    # Of the session's other parts.
    subscriptions: dict[str, Any]
    session_id: str
    version: str

    def _init_slow_consumer(self, write: Callable[[bytes], None]) -> None:
        """:param write: the transport's ``write``."""
        #: Where frames go: the transport, or the backlog while it is full.
        self._transport_write = write
        #: Where auto-ack topic messages go: the same, but droppable while behind.
        self._message_write = write
        #: What waits for the client while its socket is full; made the first time.
        self._backlog = None
        self._advisories = 0

    def pause_writing(self) -> None:
        """
        The transport's buffer is full (its ``pauseProducing``).

        A burst of fan-out fills it for a moment even for clients that keep up,
        so writes go on straight to the transport for ``write_grace`` more
        bytes; only a client still behind after that takes the slow path
        (:meth:`_fall_behind`).  The transport calls this on every write while
        its buffer is over its mark, so a repeated call returns at once.
        """
        backlog = self._backlog
        if backlog is None:
            backlog = self._backlog = Backlog()
        if backlog.full:
            return
        backlog.full = True
        if backlog.active or self.state is State.CLOSED:
            return
        backlog.grace = self.config.write_grace
        if not backlog.grace:
            self._fall_behind(backlog)
            return
        self._transport_write = self._write_in_grace
        self._message_write = self._message_in_grace

    def _write_in_grace(self, data: bytes) -> None:
        """Write a frame while the transport is full: straight through, within the grace."""
        if self._within_grace(data):
            self._transport.write(data)
        else:
            self._keep(data)

    def _message_in_grace(self, data: bytes) -> None:
        """Write a topic message while the transport is full: straight through, within the grace."""
        if self._within_grace(data):
            self._transport.write(data)
        else:
            self._keep_message(data)

    def _within_grace(self, data: bytes) -> bool:
        """:returns: whether ``data`` fits in the grace; if not, the client is behind now."""
        backlog: Any = self._backlog
        left = backlog.grace - len(data)
        if left >= 0:
            backlog.grace = left
            return True
        self._fall_behind(backlog)
        return False

    def _fall_behind(self, backlog: Backlog) -> None:
        """
        The client is behind: frames wait in the backlog from now on, and the
        broker gives this connection's queue subscriptions nothing until
        :meth:`resume_writing`.
        """
        backlog.active = True
        self._transport_write = self._keep
        self._message_write = self._keep_message
        self.broker.pause_consumers(self)

    def resume_writing(self) -> None:
        """
        The transport has flushed its buffer (its ``resumeProducing``): send the
        backlog, and once it is empty write straight through again.
        """
        backlog = self._backlog
        if backlog is None:
            return
        backlog.full = False
        write = self._transport.write
        if not backlog.active:
            # It caught up within the grace.
            self._transport_write = self._message_write = write
            return
        for data in backlog.drain():
            write(data)
            if backlog.full:
                return
        backlog.active = False
        # Caught up: the episode is over, a new one warns again.
        backlog.advised = False
        self._transport_write = self._message_write = write
        if self.state is State.CLOSED or self.state is State.CLOSING:
            return
        if BY_BACKLOG in self._read_pauses:
            self._resume_reading(BY_BACKLOG)
        self.broker.resume_consumers(self)

    def _keep(self, data: bytes) -> None:
        """Write while behind: keep any frame but a topic message, which must not be lost."""
        if self._backlog.keep(data) > self.config.slow_consumer_buffer:  # type: ignore[union-attr]
            # The client sends frames whose answers it does not read: read no more.
            if BY_BACKLOG not in self._read_pauses:
                self._pause_reading(BY_BACKLOG)

    def _keep_message(self, data: bytes) -> None:
        """Write an auto-ack topic message while behind; past the buffer, the policy decides."""
        backlog: Any = self._backlog
        waiting = backlog.keep_message(data)
        limit = self.config.slow_consumer_buffer
        if not backlog.advised and waiting > limit * ADVISORY_SHARE:
            self._advise_slow(backlog, data, waiting)
        if waiting <= limit or backlog.message_count == 1:
            return
        policy = self.config.slow_consumer_policy
        if policy == BLOCK:
            self.broker.block_sender(self)
        elif policy == DROP_OLDEST:
            dropped = backlog.drop_oldest(self.config.slow_consumer_buffer, keep=1)
            self.broker.count_dropped(self, dropped)
        else:
            self._disconnect_slow(backlog)

    def _advise_slow(self, backlog: Backlog, data: bytes, waiting: int) -> None:
        """
        Warn the client, ahead of what waits for it, on the subscription of the
        message ``data``; and the operators, on the advisory topic, in a moment
        (this runs inside the broker's fan-out).
        """
        backlog.advised = True
        config = self.config
        headers = slow_consumer_headers(
            waiting, config.slow_consumer_buffer, config.slow_consumer_policy
        )
        subscription = None
        for candidate in self.subscriptions.values():
            if data.startswith(candidate.prefix):
                subscription = candidate
                break
        if subscription is None:
            return
        body = slow_consumer_text(waiting, config.slow_consumer_policy)
        self._advisories += 1
        backlog.keep_first(
            slow_consumer_message(
                subscription.headers.get("id"),
                subscription.destination,
                f"advisory-{self.session_id}-{self._advisories}",
                headers,
                body,
                self.version,
            )
        )
        about = (
            ("session", self.session_id),
            ("address", self.peer),
            ("subscription", subscription.subscription_id),
            ("subscription-destination", subscription.destination),
        )
        backlog.advising = self._clock.callLater(
            0, self.broker.send, SLOW_CONSUMER_TOPIC, headers + about, body
        )

    def _disconnect_slow(self, backlog: Backlog) -> None:
        """
        Drop the topic messages waiting for this client, and close it with an ERROR.

        The close happens in a moment (``callLater(0)``): this runs inside the
        broker's fan-out, which closing the session from here would change under it.
        """
        dropped = backlog.drop_oldest(0)
        self._message_write = self._count_dropped
        self.broker.count_dropped(self, dropped, disconnected=True)
        limit = self.config.slow_consumer_buffer
        backlog.closing = self._clock.callLater(
            0,
            self._fail,
            LimitExceeded(
                "slow consumer",
                f"the client did not read its messages fast enough: more than {limit}"
                f" bytes of them waited for it (slow-consumer-buffer); {dropped} were"
                " dropped",
            ),
        )

    def _count_dropped(self, data: bytes) -> None:
        """Stands in for writing topic messages to a client being disconnected for slowness."""
        self.broker.count_dropped(self, 1)

    def _behind(self) -> bool:
        """:returns: whether what the session writes waits in the backlog now."""
        return self._backlog is not None and self._backlog.active

    def _flush_backlog(self) -> None:
        """
        The session is closing, which waits for the transport to flush: what
        waited for the client goes there now.
        """
        backlog = self._backlog
        if backlog is not None and backlog.active:
            write = self._transport.write
            for data in backlog.drain():
                write(data)

    def _stop_slow_consumer(self) -> None:
        """
        Cancel a pending close for slowness, and an advisory not yet published:
        the session is ending anyway.
        """
        backlog = self._backlog
        if backlog is not None:
            for timer in (backlog.closing, backlog.advising):
                if timer is not None and timer.active():
                    timer.cancel()
            backlog.closing = backlog.advising = None

    def _forget_backlog(self) -> None:
        """The connection is gone: what waited for the client never will reach it."""
        if self._backlog is not None:
            self._backlog.clear()
