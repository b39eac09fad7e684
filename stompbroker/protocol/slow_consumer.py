"""
What a session does for a client that does not read as fast as it is written to.

Theory of operation: when the transport's buffer is full it tells the session
(:meth:`SlowConsumer.pause_writing`).  After a grace that absorbs bursts of
fan-out (``write_grace``), and until the transport has drained
(:meth:`SlowConsumer.resume_writing`), writes go to the session's
:class:`~stompbroker.protocol.backlog.Backlog` and the broker gives its queue
subscriptions nothing.  ``auto``-ack topic messages are the only ones that keep
coming; when they fill ``slow_consumer_buffer``, the ``slow_consumer_policy``
(the listener's, or the strictest the per-destination policies of the
connection's topic subscriptions set, found as it falls behind) decides:
``block`` the publishers, ``drop-oldest``, or ``disconnect``.  One
message alone is never too many, however large: a message larger than the
buffer waits whole for a client that keeps reading, and the policy acts only
once another one waits behind it (``drop-oldest`` never drops the newest).  Before
the policy applies, once per episode, the client and the operators are warned
(:mod:`~stompbroker.protocol.advisory`).  Other
frames that fill as much (the client sends frames whose answers it does not
read) stop the session from reading.

The part is the session's output: every frame the session writes passes
through :meth:`SlowConsumer.write` (or, for MESSAGE frames,
:meth:`~SlowConsumer.write_message` and :meth:`~SlowConsumer.write_delivery`,
which subscriptions bind once), counted for statistics and marked for the
heart-beat.  The switch to the backlog is made by rebinding the part's two raw
write functions (``_write`` for every frame, ``_write_message`` for auto-ack
topic messages) to this module's methods and back, so a delivery to a client
that keeps up costs nothing more than the transport's own ``write``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from stompbroker.interfaces import ConnectionDescription, IBroker, ISessionTransport
from stompbroker.protocol.advisory import (
    ADVISORY_SHARE,
    SLOW_CONSUMER_TOPIC,
    slow_consumer_headers,
    slow_consumer_message,
    slow_consumer_text,
)
from stompbroker.protocol.backlog import Backlog
from stompbroker.protocol.config import BLOCK, DROP_OLDEST, SessionConfig
from stompbroker.protocol.errors import LimitExceeded
from stompbroker.protocol.parts import Clock, Failing, Reading, StateView
from stompbroker.protocol.states import State

#: One heart-beat: an EOL, which every version's parser skips between frames.
HEARTBEAT = b"\n"

#: Why a session has stopped reading: what waits for the client fills the buffer.
BY_BACKLOG = "backlog"


class SlowConsumer:
    """
    The session's writing to a client that may fall behind.

    :param connection: what the broker knows the connection by, when told it
        fell behind or caught up; the part only passes it on.
    :param subscribers: the connection's subscriptions now, whose policies
        apply and one of which the advisory is sent on.
    :param describe: the connection now, whose session id, address and version
        the advisory names.
    :param broker: told when the client falls behind and catches up.
    :param transport: where frames go.
    :param clock: for the advisory and the close, a moment later.
    :param config: the listener's settings (grace, buffer, policy).
    :param life: the session's state, read: a closed session's output waits for nothing.
    :param reading: the session's reading, paused while frames the client does
        not read fill the buffer.
    :param fail: ends the session with an ERROR (a slow consumer disconnected).
    """

    __slots__ = (
        "bytes_sent",
        "frames_sent",
        "messages_sent",
        "wrote",
        "_advisories",
        "_backlog",
        "_broker",
        "_clock",
        "_config",
        "_connection",
        "_describe",
        "_fail",
        "_life",
        "_limits",
        "_reading",
        "_subscribers",
        "_transport",
        "_write",
        "_write_message",
    )

    def __init__(
        self,
        connection: object,
        subscribers: Callable[[], Iterable[Any]],
        describe: Callable[[], ConnectionDescription],
        broker: IBroker,
        transport: ISessionTransport,
        clock: Clock,
        config: SessionConfig,
        life: StateView,
        reading: Reading,
        fail: Failing,
    ) -> None:
        self._connection = connection
        self._subscribers = subscribers
        self._describe = describe
        self._life = life
        self._reading = reading
        self._fail = fail
        self._broker = broker
        self._transport = transport
        self._clock = clock
        self._config = config
        #: For statistics: frames, MESSAGE frames and bytes written (to the
        #: socket or the backlog; heart-beats aside).
        self.frames_sent = 0
        self.messages_sent = 0
        self.bytes_sent = 0
        #: Whether anything was written since the last heart-beat check.
        self.wrote = False
        #: Where frames go: the transport, or the backlog while it is full.
        self._write: Callable[[bytes], None] = transport.write
        #: Where auto-ack topic messages go: the same, but droppable while behind.
        self._write_message: Callable[[bytes], None] = transport.write
        #: What waits for the client while its socket is full; made the first time.
        self._backlog: Backlog | None = None
        #: How many advisories this session was sent, to number their message ids.
        self._advisories = 0
        #: The slow-consumer policy and buffer of the episode of falling behind:
        #: the listener's, or the strictest its topic subscriptions' policies set.
        self._limits = (config.slow_consumer_policy, config.slow_consumer_buffer)

    # -- writing -----------------------------------------------------------------

    def write(self, data: bytes) -> None:
        """
        Send bytes to the client; every outgoing frame passes here.

        :param data: encoded frames.
        """
        self.wrote = True
        self.frames_sent += 1
        self.bytes_sent += len(data)
        self._write(data)

    def write_delivery(self, data: bytes) -> None:
        """A queue subscription's MESSAGE: :meth:`write` (inline), counted as a message."""
        self.messages_sent += 1
        self.wrote = True
        self.frames_sent += 1
        self.bytes_sent += len(data)
        self._write(data)

    def write_message(self, data: bytes) -> None:
        """
        Send an auto-ack topic MESSAGE (counted in batches, :meth:`count_messages`):
        while the client is behind, such messages are the ones its slow-consumer
        policy may drop.

        :param data: one encoded MESSAGE frame.
        """
        self.wrote = True
        self._write_message(data)

    def write_messages(self, data: bytes, count: int) -> None:
        """Write ``count`` MESSAGE frames in one write (what a resumed client missed)."""
        self.frames_sent += count
        self.bytes_sent += len(data)
        self.write_message(data)

    def count_messages(self, count: int, size: int) -> None:
        """Count ``count`` topic MESSAGE frames of ``size`` bytes (``count_deliveries``)."""
        self.frames_sent += count
        self.messages_sent += count
        self.bytes_sent += size

    def beat(self) -> None:
        """Write a heart-beat, unless anything else was written since the last call."""
        if not self.wrote and not self.behind():
            self._write(HEARTBEAT)
        self.wrote = False

    @property
    def backlog(self) -> Backlog | None:
        """What waits for the client; ``None`` until its socket first filled."""
        return self._backlog

    @property
    def closing(self) -> Any:
        """The close for slowness scheduled, or ``None``."""
        return None if self._backlog is None else self._backlog.closing

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
        if backlog.active or self._life.state is State.CLOSED:
            return
        backlog.grace = self._config.write_grace
        if not backlog.grace:
            self._fall_behind(backlog)
            return
        self._write = self._write_in_grace
        self._write_message = self._message_in_grace

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
        config = self._config
        self._limits = self._broker.slow_consumer(
            [subscription.destination for subscription in self._subscribers()],
            config.slow_consumer_policy,
            config.slow_consumer_buffer,
        )
        self._write = self._keep
        self._write_message = self._keep_message
        self._broker.pause_consumers(self._connection)

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
            self._write = self._write_message = write
            return
        for data in backlog.drain():
            write(data)
            if backlog.full:
                return
        backlog.active = False
        # Caught up: the episode is over, a new one warns again.
        backlog.advised = False
        self._write = self._write_message = write
        state = self._life.state
        if state is State.CLOSED or state is State.CLOSING:
            return
        self._reading.resume(BY_BACKLOG)
        self._broker.resume_consumers(self._connection)

    def _keep(self, data: bytes) -> None:
        """Write while behind: keep any frame but a topic message, which must not be lost."""
        if self._backlog.keep(data) > self._limits[1]:  # type: ignore[union-attr]
            # The client sends frames whose answers it does not read: read no more.
            self._reading.pause(BY_BACKLOG)

    def _keep_message(self, data: bytes) -> None:
        """Write an auto-ack topic message while behind; past the buffer, the policy decides."""
        backlog: Any = self._backlog
        waiting = backlog.keep_message(data)
        policy, limit = self._limits
        if not backlog.advised and waiting > limit * ADVISORY_SHARE:
            self._advise_slow(backlog, data, waiting)
        if waiting <= limit or backlog.message_count == 1:
            return
        if policy == BLOCK:
            self._broker.block_sender(self._connection)
        elif policy == DROP_OLDEST:
            dropped = backlog.drop_oldest(limit, keep=1)
            self._broker.count_dropped(self._connection, dropped)
        else:
            self._disconnect_slow(backlog)

    def _advise_slow(self, backlog: Backlog, data: bytes, waiting: int) -> None:
        """
        Warn the client, ahead of what waits for it, on the subscription of the
        message ``data``; and the operators, on the advisory topic, in a moment
        (this runs inside the broker's fan-out).
        """
        backlog.advised = True
        policy, limit = self._limits
        headers = slow_consumer_headers(waiting, limit, policy)
        subscription = None
        for candidate in self._subscribers():
            if data.startswith(candidate.prefix):
                subscription = candidate
                break
        if subscription is None:
            return
        connection = self._describe()
        body = slow_consumer_text(waiting, policy)
        self._advisories += 1
        backlog.keep_first(
            slow_consumer_message(
                subscription.headers.get("id"),
                subscription.destination,
                f"advisory-{connection.session}-{self._advisories}",
                headers,
                body,
                connection.version or "1.2",
            )
        )
        about = (
            ("session", connection.session),
            ("address", connection.address),
            ("subscription", subscription.subscription_id),
            ("subscription-destination", subscription.destination),
        )
        backlog.advising = self._clock.callLater(
            0, self._broker.send, SLOW_CONSUMER_TOPIC, headers + about, body
        )

    def _disconnect_slow(self, backlog: Backlog) -> None:
        """
        Drop the topic messages waiting for this client, and close it with an ERROR.

        The close happens in a moment (``callLater(0)``): this runs inside the
        broker's fan-out, which closing the session from here would change under it.
        """
        dropped = backlog.drop_oldest(0)
        self._write_message = self._count_dropped
        self._broker.count_dropped(self._connection, dropped, disconnected=True)
        limit = self._limits[1]
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
        self._broker.count_dropped(self._connection, 1)

    def behind(self) -> bool:
        """:returns: whether what the session writes waits in the backlog now."""
        return self._backlog is not None and self._backlog.active

    def flush(self) -> None:
        """
        The session is closing, which waits for the transport to flush: what
        waited for the client goes there now.
        """
        backlog = self._backlog
        if backlog is not None and backlog.active:
            write = self._transport.write
            for data in backlog.drain():
                write(data)

    def stop(self) -> None:
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

    def forget(self) -> None:
        """The connection is gone: what waited for the client never will reach it."""
        if self._backlog is not None:
            self._backlog.clear()
