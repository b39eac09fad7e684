"""
The options of redelivery back-off: ``--redelivery-delay``,
``--redelivery-multiplier`` and ``--redelivery-max-delay`` (docs/destinations.md,
"Redelivery back-off").

:class:`RedeliveryOptions` is a mixin of :class:`stompbroker.app.options.Options`
(twistd gathers ``optParameters`` along the class hierarchy); it parses and
checks, and ``backoff`` holds the
:class:`~stompbroker.broker.queueing.backoff.Backoff` that
:func:`stompbroker.app.tap.makeService` puts in the delivery policy.
"""

from __future__ import annotations

from typing import Any

from twisted.python import usage

from stompbroker.app.option_values import named, non_negative, number
from stompbroker.broker.queueing.backoff import LONGEST_MS, Backoff

__all__ = ["RedeliveryOptions"]

DEFAULT = Backoff()


class RedeliveryOptions(usage.Options):
    """The redelivery back-off options; ``backoff`` holds the result."""

    optParameters: list[Any] = named(
        [
            [
                "redelivery-delay",
                None,
                DEFAULT.delay_ms,
                "Milliseconds a NACKed message waits before its first redelivery (0 = none); "
                "a subscription may set its own with redelivery-delay.",
                non_negative,
            ],
            [
                "redelivery-multiplier",
                None,
                DEFAULT.multiplier,
                "Each later redelivery of a message waits this many times longer (1 to 100).",
                number,
            ],
            [
                "redelivery-max-delay",
                None,
                DEFAULT.max_delay_ms,
                "The longest a redelivery waits, in milliseconds.",
                non_negative,
            ],
        ]
    )

    def check_redelivery(self) -> None:
        """
        Read the options into ``backoff``.

        :raises usage.UsageError: naming the option whose value is out of range.
        """
        for option in ("redelivery-delay", "redelivery-max-delay"):
            if self[option] > LONGEST_MS:
                raise usage.UsageError(
                    f"--{option} must be 0 to {LONGEST_MS} ms (a day), got {self[option]}"
                )
        multiplier = self["redelivery-multiplier"]
        if not 1 <= multiplier <= 100:
            raise usage.UsageError(f"--redelivery-multiplier must be 1 to 100, got {multiplier!r}")
        self["backoff"] = Backoff(
            self["redelivery-delay"], float(multiplier), self["redelivery-max-delay"]
        )
