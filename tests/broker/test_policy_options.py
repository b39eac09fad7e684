"""
The delivery options of ``twistd stompbroker`` reach the broker's DeliveryPolicy,
on a MemoryReactorClock.
"""

from __future__ import annotations

import pytest
from twisted.internet.testing import MemoryReactorClock
from twisted.python import usage

from stompbroker.app.tap import makeService
from stompbroker.broker.queueing.delivery import DeliveryPolicy
from tests.support.options import parse


def broker_policy(*argv: str) -> DeliveryPolicy:
    """:returns: the delivery policy of the broker that ``argv`` configures."""
    options = parse(*argv, "--http", "none", "--data-dir", "none")
    return makeService(options, reactor=MemoryReactorClock()).getServiceNamed("broker").policy


def test_defaults_are_the_documented_ones() -> None:
    """
    Without delivery options the broker runs on DeliveryPolicy's defaults (prefetch 1000,
    6 redeliveries).
    """
    assert broker_policy() == DeliveryPolicy() == DeliveryPolicy(1000, 6, "DLQ.", "drop", 0)


def test_every_delivery_option_reaches_the_policy() -> None:
    """--prefetch, --max-redeliveries, --dead-letter-prefix, --expired and --ttl set the policy."""
    policy = broker_policy(
        "--prefetch=7",
        "--max-redeliveries=-1",
        "--dead-letter-prefix=failed.",
        "--expired=dead-letter",
        "--ttl=60000",
    )
    assert policy == DeliveryPolicy(7, -1, "failed.", "dead-letter", 60000)


@pytest.mark.parametrize(
    "argv",
    [
        ["--prefetch", "0"],
        ["--max-redeliveries", "-2"],
        ["--dead-letter-prefix", ""],
        ["--dead-letter-prefix", "dead/"],
        ["--expired", "keep"],
        ["--ttl", "-5"],
        ["--ttl", "soon"],
    ],
)
def test_invalid_delivery_options_are_usage_errors(argv: list[str]) -> None:
    """A delivery option that cannot work is refused before the broker starts."""
    with pytest.raises(usage.UsageError):
        parse(*argv)
