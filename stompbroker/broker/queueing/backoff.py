"""
Redelivery back-off: how long a NACKed message waits before its next delivery.

A consumer that NACKs every delivery at once (a poison message, a downstream
outage) would otherwise use up its subscription's redeliveries in milliseconds
and send the message to its dead-letter queue before anything could recover.
As ActiveMQ's ``RedeliveryPolicy`` (``initialRedeliveryDelay``,
``backOffMultiplier``, ``maximumRedeliveryDelay``) and Artemis's address
settings (``redelivery-delay``, ``redelivery-delay-multiplier``,
``max-redelivery-delay``) do, the n-th redelivery of a message waits

    min(initial * multiplier ** (n - 1), maximum)

so the first waits ``initial`` and each later one ``multiplier`` times longer,
never more than ``maximum``.  An ``initial`` of 0 redelivers at once, as
before.  Pure values: no clock, no I/O.

The broker's defaults are the ``--redelivery-delay``, ``--redelivery-multiplier``
and ``--redelivery-max-delay`` options (a destination's policy may set others,
docs/policies.md); a SUBSCRIBE may set its own with the headers of
:data:`BACKOFF_HEADERS`, parsed by :func:`parse_backoff`, which raises
:class:`~stompbroker.protocol.errors.MalformedFrame` (an ERROR) for a bad value.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from attrs import Attribute, field, frozen

from stompbroker.protocol.errors import MalformedFrame

__all__ = [
    "BACKOFF_HEADERS",
    "DELAY_HEADER",
    "MAX_DELAY_HEADER",
    "MULTIPLIER_HEADER",
    "Backoff",
    "parse_backoff",
]

#: SUBSCRIBE header: the delay before a NACKed message's first redelivery, in ms.
DELAY_HEADER = "redelivery-delay"
#: SUBSCRIBE header: how much longer each later redelivery waits than the one before.
MULTIPLIER_HEADER = "redelivery-multiplier"
#: SUBSCRIBE header: the longest a redelivery waits, in ms.
MAX_DELAY_HEADER = "redelivery-max-delay"
BACKOFF_HEADERS = (DELAY_HEADER, MULTIPLIER_HEADER, MAX_DELAY_HEADER)

#: The longest delay anyone may ask for: a day, in ms.
LONGEST_MS = 86_400_000


def _milliseconds(instance: object, attribute: Attribute, value: int) -> None:
    if not isinstance(value, int) or not 0 <= value <= LONGEST_MS:
        raise ValueError(f"{attribute.name} must be 0 to {LONGEST_MS} ms, got {value!r}")


def _multiplier(instance: object, attribute: Attribute, value: float) -> None:
    if not isinstance(value, int | float) or not 1 <= value <= 100:
        raise ValueError(f"{attribute.name} must be 1 to 100, got {value!r}")


@frozen
class Backoff:
    """
    One redelivery back-off: a subscription's, a destination policy's or the broker's.

    :ivar delay_ms: the wait before the first redelivery; 0 for none at all.
    :ivar multiplier: each later redelivery waits this much longer (1: always ``delay_ms``).
    :ivar max_delay_ms: the longest wait.
    """

    delay_ms: int = field(default=1000, validator=_milliseconds)
    multiplier: float = field(default=2.0, validator=_multiplier)
    max_delay_ms: int = field(default=60_000, validator=_milliseconds)

    @property
    def active(self) -> bool:
        """Whether a redelivery ever waits."""
        return self.delay_ms > 0

    def delay(self, redeliveries: int) -> float:
        """
        :param redeliveries: the message's count with this redelivery (1 for the first).
        :returns: the wait in seconds before that redelivery.
        """
        if not self.delay_ms or redeliveries < 1:
            return 0.0
        # The exponent is bounded so that the power cannot overflow a float.
        exponent = min(redeliveries - 1, 64)
        wait = min(self.delay_ms * self.multiplier**exponent, self.max_delay_ms)
        return wait / 1000.0


def _whole_ms(name: str, text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = -1
    if not 0 <= value <= LONGEST_MS:
        raise MalformedFrame(
            f"bad {name} header",
            f"{name} must be a whole number of milliseconds from 0 to {LONGEST_MS}, got {text!r}",
        )
    return value


def parse_backoff(headers: Mapping[str, str], default: Backoff) -> Backoff:
    """
    A subscription's back-off: ``default`` with what its SUBSCRIBE headers set.

    :param headers: the SUBSCRIBE's headers.
    :param default: the destination's back-off (its policy's, or the broker's).
    :returns: ``default`` itself when no header is given.
    :raises MalformedFrame: for a value that is not a number in range.
    """
    if not any(name in headers for name in BACKOFF_HEADERS):
        return default
    delay = default.delay_ms
    maximum = default.max_delay_ms
    multiplier = default.multiplier
    if DELAY_HEADER in headers:
        delay = _whole_ms(DELAY_HEADER, headers[DELAY_HEADER])
    if MAX_DELAY_HEADER in headers:
        maximum = _whole_ms(MAX_DELAY_HEADER, headers[MAX_DELAY_HEADER])
    if MULTIPLIER_HEADER in headers:
        text = headers[MULTIPLIER_HEADER]
        try:
            multiplier = float(text)
        except ValueError:
            multiplier = math.nan
        if not 1 <= multiplier <= 100:
            raise MalformedFrame(
                f"bad {MULTIPLIER_HEADER} header",
                f"{MULTIPLIER_HEADER} must be a number from 1 to 100, got {text!r}",
            )
    return Backoff(delay, multiplier, maximum)
