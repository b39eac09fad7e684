"""
Rate limits applied: each metered connection's :class:`ConnectionGate`, the
users' shared buckets, new connections per address, and their counts.

A connection whose rates are limited (:attr:`RateLimits.metered
<stompbroker.broker.flow.rate_limits.RateLimits.metered>`) reads through a gate: the
transport hands each chunk it read to :meth:`ConnectionGate.receive_data`,
which passes it to the session and then takes, from the connection's buckets
and its user's, the bytes read and the SEND frames the session counted in
them.  A bucket left in debt pauses the connection's reading
(:meth:`IConnection.pause_reading <stompbroker.interfaces.IConnection.pause_reading>`,
for the reason ``rate``: the transport's ``pauseProducing``, so the kernel's
buffers fill and the client's sends block) until the debt is paid.  So a fast
client is slowed to its rate, never refused what it sent.

The burst is held per frame, not per read: a read (up to 64 KiB, a thousand
small SENDs) that could hold more frames than the buckets have tokens left
(more NUL bytes, each frame's end, than messages, or more bytes than bytes) is
handed to the session one frame at a time, each charged as it is handled; at
the first that puts a bucket in debt the gate keeps the rest of the read,
unhandled, pauses reading, and hands it on once the debt is paid.  What
arrives while reading is paused (a WebSocket adapter may have more messages of
a read to hand over) is kept behind it.  A read within the tokens left is
handed over whole, and charged once.

A connection stays *over* its rate from the chunk that first put a bucket in
debt until a chunk that leaves every bucket out of debt (the client slowed down
by itself; what the gate kept, read while it was over, does not count). Over
for ``over_time`` seconds (when set), it gets an ERROR naming the limit, and is
closed: when a chunk comes then, or, if the client sent so much in one go that
its debt outlasts ``over_time``, when that time is up.

Connections without limits have no gate: the transport hands their chunks to
the session directly, and rate limiting costs them nothing.
"""

from __future__ import annotations

from typing import Any

from attrs import frozen

from stompbroker.broker.flow.rate_limits import Rate, RateLimits, Rates, TokenBucket
from stompbroker.logs import logger
from stompbroker.protocol.errors import LimitExceeded

__all__ = ["RATE", "ConnectionGate", "RateFigures", "RateLimiter"]

log = logger("stompbroker.broker")

#: Why a connection's reading is paused while it is over its rate.
RATE = "rate"
#: Addresses remembered for the connection rate before the full buckets are forgotten.
ADDRESS_SWEEP = 1024


@frozen
class RateFigures:
    """
    What rate limiting did, for ``/stats`` and ``/metrics``.

    :ivar slowed: connections whose reading is paused for a rate now.
    :ivar slowed_total: times a connection was slowed, since the start.
    :ivar disconnected: connections closed for staying over a rate.
    :ivar refused: connections refused for the connection rate of their address.
    """

    slowed: int
    slowed_total: int
    disconnected: int
    refused: int

    def to_dict(self) -> dict[str, int]:
        """:returns: the figures as the JSON document's fields."""
        return {
            "slowed": self.slowed,
            "slowed_total": self.slowed_total,
            "disconnected": self.disconnected,
            "refused": self.refused,
        }


def _bucket(rate: Rate | None, now: float) -> TokenBucket | None:
    return None if rate is None else TokenBucket(rate, now)


#: Each bucket's unit and option, for the ERROR that names it.
_CONNECTION_NAMES = (("bytes", "rate-limit-bytes"), ("messages", "rate-limit-messages"))
_USER_NAMES = (("bytes", "rate-limit-user-bytes"), ("messages", "rate-limit-user-messages"))


class _Buckets:
    """The buckets of one scope: bytes and messages, either absent."""

    __slots__ = ("bytes", "messages", "names", "users")

    def __init__(self, rates: Rates, now: float, names: tuple[tuple[str, str], ...]) -> None:
        self.bytes = _bucket(rates.bytes, now)
        self.messages = _bucket(rates.messages, now)
        self.names = names
        #: Connections sharing these buckets (a user's).
        self.users = 0


class RateLimiter:
    """
    The broker's rate limits in force.

    :param clock: ``seconds`` and ``callLater``: the reactor, or a ``task.Clock``.
    :param limits: the limits.
    """

    def __init__(self, clock: Any, limits: RateLimits) -> None:
        self.limits = limits
        self._clock = clock
        self._users: dict[str, _Buckets] = {}
        self._addresses: dict[str, TokenBucket] = {}
        self._sweep_at = ADDRESS_SWEEP
        #: The gates whose connection is slowed now.
        self.slowed: set[ConnectionGate] = set()
        self.slowed_total = 0
        self.disconnected = 0
        self.refused = 0

    @property
    def metered(self) -> bool:
        """Whether connections read through a :class:`ConnectionGate`."""
        return self.limits.metered

    def figures(self) -> RateFigures | None:
        """:returns: what rate limiting did so far; ``None`` without any rate limit."""
        limits = self.limits
        if not limits.metered and limits.connection_rate is None:
            return None
        return RateFigures(len(self.slowed), self.slowed_total, self.disconnected, self.refused)

    def admit(self, host: str) -> None:
        """
        Count a new connection from ``host`` against the connection rate.

        :raises LimitExceeded: naming the limit, when ``host`` is over it.
        """
        rate = self.limits.connection_rate
        if rate is None:
            return
        now = self._clock.seconds()
        bucket = self._addresses.get(host)
        if bucket is None:
            if len(self._addresses) >= self._sweep_at:
                self._sweep(now)
            bucket = self._addresses[host] = TokenBucket(rate, now)
        if not bucket.admit(now):
            self.refused += 1
            raise LimitExceeded(
                "too many new connections from this address",
                f"the broker accepts at most {rate.describe('connections')} from one"
                " address (max-connection-rate); connect again later",
            )

    def _sweep(self, now: float) -> None:
        """Forget the addresses whose bucket is full again: they are as new."""
        self._addresses = {
            host: bucket for host, bucket in self._addresses.items() if not bucket.full(now)
        }
        self._sweep_at = max(ADDRESS_SWEEP, 2 * len(self._addresses))

    def gate(self, connection: Any) -> ConnectionGate:
        """:returns: the gate ``connection`` reads through (see the module notes)."""
        return ConnectionGate(self, connection, self._clock)

    def user_buckets(self, login: str, rates: Rates) -> _Buckets | None:
        """:returns: the buckets ``login`` shares among its connections, one more user counted."""
        if not rates:
            return None
        buckets = self._users.get(login)
        if buckets is None:
            buckets = self._users[login] = _Buckets(rates, self._clock.seconds(), _USER_NAMES)
        buckets.users += 1
        return buckets

    def release_user(self, login: str) -> None:
        """One connection of ``login`` has gone; its buckets go with the last one."""
        buckets = self._users.get(login)
        if buckets is not None:
            buckets.users -= 1
            if not buckets.users:
                del self._users[login]


#: Seconds of debt left that count as paid: the refill's rounding, which a timer
#: that short would only meet again (and at once, on a clock that does not move).
PAID = 1e-6

#: The tokens left where there is no bucket.
_UNLIMITED = float("inf")

#: The login of a connection not yet looked up.
_UNKNOWN = object()


class ConnectionGate:
    """
    What one metered connection reads passes here (see the module notes).

    :param limiter: the broker's :class:`RateLimiter`.
    :param connection: the session, an :class:`~stompbroker.interfaces.IConnection`
        with ``receive_data``, ``messages_received`` and ``identity``.
    :param clock: ``seconds`` and ``callLater``.
    """

    __slots__ = (
        "_limiter",
        "_connection",
        "_clock",
        "_own",
        "_user",
        "_login",
        "_over_since",
        "_resume",
        "_paused",
        "_kept",
        "_draining",
    )

    def __init__(self, limiter: RateLimiter, connection: Any, clock: Any) -> None:
        self._limiter = limiter
        self._connection = connection
        self._clock = clock
        self._own = _Buckets(limiter.limits.connection, clock.seconds(), _CONNECTION_NAMES)
        self._user: _Buckets | None = None
        self._login: Any = _UNKNOWN
        #: When the connection went over its rate, this time; ``None`` while it is not.
        self._over_since: float | None = None
        self._resume: Any = None
        #: Whether the connection's reading is paused for its rates.
        self._paused = False
        #: What was read and not yet handed to the session, while paused.
        self._kept: list[bytes] = []
        #: Whether what is handed over now was kept: it says nothing of the client's pace now.
        self._draining = False

    def receive_data(self, data: bytes) -> None:
        """
        Hand ``data`` to the session, whole if the buckets have the tokens for
        all the frames it may hold, else frame by frame (see the module notes).
        """
        if self._paused:
            self._kept.append(data)
            return
        messages, size = self._tokens_left()
        if data.count(b"\0") > messages or len(data) > size:
            self._receive_by_frame(data)
            return
        connection = self._connection
        before = connection.messages_received
        connection.receive_data(data)
        self.charge(len(data), connection.messages_received - before)

    def _receive_by_frame(self, data: bytes) -> None:
        """Hand ``data`` over up to each NUL; keep the rest once a bucket is in debt."""
        connection = self._connection
        start, size = 0, len(data)
        while start < size:
            end = data.find(b"\0", start) + 1 or size
            before = connection.messages_received
            connection.receive_data(data[start:end])
            self.charge(end - start, connection.messages_received - before)
            start = end
            if self._paused and start < size:
                self._kept.append(data[start:])
                return

    def _tokens_left(self) -> tuple[float, float]:
        """
        :returns: the fewest message tokens, and the fewest byte tokens, in the
            connection's and its user's buckets now (infinite without a bucket).
        """
        now = self._clock.seconds()
        messages = size = _UNLIMITED
        for buckets in (self._own, self._user):
            if buckets is None:
                continue
            if buckets.messages is not None:
                messages = min(messages, buckets.messages.tokens(now))
            if buckets.bytes is not None:
                size = min(size, buckets.bytes.tokens(now))
        return messages, size

    def charge(self, size: int, messages: int) -> None:
        """
        Take ``size`` bytes and ``messages`` SEND frames from the buckets; slow the
        connection while one is in debt, close it once it stayed over too long.
        """
        now = self._clock.seconds()
        if self._login is _UNKNOWN:
            self._look_up_login(now)
        wait = 0.0
        over: tuple[Rate, str, str] | None = None
        charged = False
        for buckets in (self._own, self._user):
            if buckets is None:
                continue
            for bucket, amount, (unit, option) in (
                (buckets.bytes, size, buckets.names[0]),
                (buckets.messages, messages, buckets.names[1]),
            ):
                if bucket is None or not amount:
                    continue
                charged = True
                seconds = bucket.take(amount, now)
                if seconds > wait:
                    wait, over = seconds, (bucket.rate, unit, option)
        if over is not None:
            self._slow(wait, over, now)
        elif charged and not self._draining:
            # A read within the rate: the client slowed down by itself.
            self._over_since = None

    def close(self) -> None:
        """The connection has gone: stop its timer, and let go of its user's buckets."""
        if self._resume is not None and self._resume.active():
            self._resume.cancel()
        self._resume = None
        self._paused = False
        self._kept = []
        self._limiter.slowed.discard(self)
        if isinstance(self._login, str) and self._user is not None:
            self._limiter.release_user(self._login)
        self._user = None

    def _look_up_login(self, now: float) -> None:
        """Once the connection has logged in, take up its login's rates."""
        identity = getattr(self._connection, "identity", None)
        if identity is None:
            return
        login = None if identity.anonymous else identity.name
        self._login = login
        limits = self._limiter.limits
        own, user = limits.for_login(login)
        if own != limits.connection:
            self._own = _Buckets(own, now, _CONNECTION_NAMES)
        if login is not None:
            self._user = self._limiter.user_buckets(login, user)

    def _debt(self, now: float) -> tuple[float, tuple[Rate, str, str] | None]:
        """:returns: the longest wait of the buckets now, and the limit it is for."""
        wait = 0.0
        over: tuple[Rate, str, str] | None = None
        for buckets in (self._own, self._user):
            if buckets is None:
                continue
            for bucket, (unit, option) in zip(
                (buckets.bytes, buckets.messages), buckets.names, strict=True
            ):
                if bucket is not None:
                    seconds = bucket.take(0, now)
                    if seconds > wait:
                        wait, over = seconds, (bucket.rate, unit, option)
        return wait, over

    def _slow(self, wait: float, over: tuple[Rate, str, str], now: float) -> None:
        """
        Pause reading until the debt is paid, or until the over time is up, to
        look again then: a client that sent a lot in one read is still caught.
        """
        over_since = self._over_since
        if over_since is None:
            over_since = self._over_since = now
        limit = self._limiter.limits.over_time
        if limit and now - over_since >= limit:
            self._disconnect(over, limit)
            return
        due = now + wait
        if limit and over_since + limit < due:
            due = over_since + limit
        if not self._paused:
            self._paused = True
            limiter = self._limiter
            limiter.slowed.add(self)
            limiter.slowed_total += 1
            self._connection.pause_reading(RATE)
        resume = self._resume
        if resume is None:
            self._resume = self._clock.callLater(due - now, self._wake)
        elif resume.getTime() < due:
            resume.reset(due - now)

    def _wake(self) -> None:
        """The wait is over: read again if the debt is paid, else slow on (or close)."""
        self._resume = None
        now = self._clock.seconds()
        wait, over = self._debt(now)
        if over is not None and wait > PAID:
            self._slow(wait, over, now)
            return
        self._paused = False
        self._limiter.slowed.discard(self)
        kept, self._kept = self._kept, []
        self._draining = True
        try:
            for data in kept:
                self.receive_data(data)
        finally:
            self._draining = False
        if not self._paused:
            self._connection.resume_reading(RATE)

    def _disconnect(self, over: tuple[Rate, str, str], limit: float) -> None:
        rate, unit, option = over
        self._limiter.disconnected += 1
        connection = self._connection
        log.info(
            "closing {peer}: over {rate} ({option}) for {seconds} s",
            peer=getattr(connection, "peer", ""),
            rate=rate.describe(unit),
            option=option,
            seconds=limit,
        )
        self.close()
        connection.fail(
            LimitExceeded(
                "rate limit exceeded",
                f"this connection sent more than {rate.describe(unit)} ({option}) for"
                f" {limit:g} s (rate-limit-over-time)",
            )
        )
