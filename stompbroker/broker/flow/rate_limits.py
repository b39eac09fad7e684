"""
Rate limits: what they are (:class:`RateLimits`, one value) and the token
bucket that measures a rate (:class:`TokenBucket`), pure logic with the time
given by the caller.

A bucket holds up to ``burst`` tokens and gains ``per_second`` of them each
second.  What a client sends is *taken* after it arrived, and may take the
bucket below zero: the debt is how far over its rate the client went, and
``-level / per_second`` is how long it must wait (be read no more) to be back
at its rate.  So a client is never refused what it already sent; it is slowed
(:mod:`stompbroker.broker.flow.rate_gates` pauses its reading).

For new connections a bucket is asked first (:meth:`TokenBucket.admit`): a
connection comes in only while a whole token is there.
"""

from __future__ import annotations

from collections.abc import Mapping

from attrs import Factory, field, frozen
from attrs.validators import instance_of, optional

__all__ = ["Rate", "RateLimits", "Rates", "TokenBucket"]


def _check(name: str, value: object, zero: bool) -> None:
    """:raises ValueError: unless ``value`` is a finite number above 0 (or 0, with ``zero``)."""
    if (
        not isinstance(value, (int, float))
        or value != value
        or value == float("inf")
        or value < 0
        or (value == 0 and not zero)
    ):
        relation = "0 or more" if zero else "more than 0"
        raise ValueError(f"{name} must be a number, {relation}, got {value!r}")


@frozen
class Rate:
    """
    A rate with a burst.

    :ivar per_second: units (messages, bytes, connections) per second; more than 0.
    :ivar burst: most units at once, after a quiet time; at least one second's worth
        (``per_second``) when 0 is given.
    """

    per_second: float = field(validator=lambda _, a, value: _check(a.name, value, False))
    burst: float = field(default=0.0, validator=lambda _, a, value: _check(a.name, value, True))

    @property
    def capacity(self) -> float:
        """:returns: the bucket's size: the burst, or one second's worth without one."""
        return self.burst or self.per_second

    def describe(self, unit: str) -> str:
        """:returns: the rate in words, for an ERROR and the logs (``100 messages/s``)."""
        return f"{self.per_second:g} {unit}/s (burst {self.capacity:g})"


@frozen
class Rates:
    """
    The rates of one scope (a connection, or a user across its connections).

    :ivar messages: SEND frames per second, or ``None`` for no limit.
    :ivar bytes: bytes read per second (frames of every kind), or ``None``.
    """

    messages: Rate | None = field(default=None, validator=optional(instance_of(Rate)))
    bytes: Rate | None = field(default=None, validator=optional(instance_of(Rate)))

    def __bool__(self) -> bool:
        return self.messages is not None or self.bytes is not None


@frozen
class RateLimits:
    """
    Every rate limit of the broker, as one value.

    :ivar connection: each connection's own rates.
    :ivar user: the rates of a login across all its connections (to this node);
        anonymous connections have none.
    :ivar over_time: seconds a connection may stay over a rate (slowed without a
        break) before it gets an ERROR and is closed; 0 never closes it.
    :ivar connection_rate: new connections per second from one address, or ``None``.
    :ivar per_user: login -> the ``(connection, user)`` rates that replace the two
        above for that login, once it has logged in (the configuration file's table).
    """

    connection: Rates = field(default=Rates(), validator=instance_of(Rates))
    user: Rates = field(default=Rates(), validator=instance_of(Rates))
    over_time: float = field(default=0.0, validator=lambda _, a, value: _check(a.name, value, True))
    connection_rate: Rate | None = field(default=None, validator=optional(instance_of(Rate)))
    per_user: Mapping[str, tuple[Rates, Rates]] = Factory(dict)

    @property
    def metered(self) -> bool:
        """Whether connections' reading is metered at all: without, it costs nothing."""
        return bool(self.connection or self.user or self.per_user)

    def for_login(self, login: str | None) -> tuple[Rates, Rates]:
        """:returns: the connection's and the user's rates for ``login`` (``None``: anonymous)."""
        if login is None:
            return self.connection, Rates()
        return self.per_user.get(login, (self.connection, self.user))


class TokenBucket:
    """
    A token bucket on a caller's clock, allowed to go into debt (see the module notes).

    :param rate: how fast it fills, and how much it holds.
    :param now: the time now, in seconds; it starts full.
    """

    __slots__ = ("rate", "_per_second", "_capacity", "level", "_stamp")

    def __init__(self, rate: Rate, now: float) -> None:
        self.rate = rate
        self._per_second = rate.per_second
        self._capacity = rate.capacity
        #: Tokens in the bucket now (as of the last call); below 0, the debt.
        self.level = self._capacity
        self._stamp = now

    def _fill(self, now: float) -> float:
        level = self.level + (now - self._stamp) * self._per_second
        if level > self._capacity:
            level = self._capacity
        self._stamp = now
        self.level = level
        return level

    def take(self, amount: float, now: float) -> float:
        """
        Take ``amount`` tokens, into debt if need be.

        :returns: seconds until the debt is paid (0 without one).
        """
        level = self._fill(now) - amount
        self.level = level
        return -level / self._per_second if level < 0 else 0.0

    def tokens(self, now: float) -> float:
        """:returns: the tokens in the bucket now; below 0, the debt."""
        return self._fill(now)

    def admit(self, now: float) -> bool:
        """:returns: whether a whole token was there; it is taken if so, nothing is otherwise."""
        if self._fill(now) >= 1:
            self.level -= 1
            return True
        return False

    def full(self, now: float) -> bool:
        """:returns: whether the bucket is full: it has forgotten everything taken from it."""
        return self._fill(now) >= self._capacity
