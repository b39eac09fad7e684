"""
When a message expires, from its headers and the broker-wide TTL.

Two conventions are in use and both are honoured: ``expires`` is an absolute time
in milliseconds since the epoch (ActiveMQ, Artemis; ``0`` means never), and
``expiration`` a time to live in milliseconds from when the broker receives the
message (RabbitMQ).  When a message has both, the earlier time counts.  A
message with neither (or with ``expires:0``) gets the broker's ``--ttl``, if
one is set: the broker-wide TTL is a bound on memory that clients cannot opt
out of.

Inside the broker an expiry is a float of the broker clock's seconds, and ``0.0``
means never; a message is expired once the clock reaches it.
"""

from __future__ import annotations

from stompbroker.protocol.errors import MalformedFrame

#: The headers that set a message's expiry.
EXPIRY_HEADERS: frozenset[str] = frozenset({"expires", "expiration"})


def _milliseconds(name: str, value: str) -> int:
    """
    :raises MalformedFrame: if ``value`` is not a non-negative integer.
    """
    if not (value.isascii() and value.isdigit()):
        raise MalformedFrame(
            f"invalid {name} header",
            f"{name} must be a non-negative integer number of milliseconds, got {value!r}",
        )
    return int(value)


def expiry_time(expires: str | None, expiration: str | None, now: float, ttl_ms: int) -> float:
    """
    Work out when a message expires.

    :param expires: the ``expires`` header: ms since the epoch; ``0`` means never.
    :param expiration: the ``expiration`` header: ms to live from ``now``.
    :param now: the broker clock's time in seconds (the epoch-based reactor time).
    :param ttl_ms: the broker-wide default time to live; ``0`` means none.
    :returns: the expiry in clock seconds, or ``0.0`` for never.
    :raises MalformedFrame: if a header is not a non-negative integer.
    """
    candidates = []
    if expires is not None:
        absolute = _milliseconds("expires", expires)
        if absolute:
            candidates.append(absolute / 1000.0)
    if expiration is not None:
        candidates.append(now + _milliseconds("expiration", expiration) / 1000.0)
    if candidates:
        return min(candidates)
    if ttl_ms:
        return now + ttl_ms / 1000.0
    return 0.0


def is_expired(expires: float, now: float) -> bool:
    """
    :param expires: an expiry from :func:`expiry_time`.
    :param now: the broker clock's time.
    :returns: whether a message with that expiry must no longer be delivered.
    """
    return 0.0 < expires <= now
