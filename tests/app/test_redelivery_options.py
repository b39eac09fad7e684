"""
Tests of the redelivery back-off options (:mod:`stompbroker.app.redelivery_options`).
"""

from __future__ import annotations

import pytest
from twisted.python import usage

from stompbroker.broker.queueing.backoff import Backoff
from tests.support.options import parse


def test_the_defaults_are_the_library_s_own() -> None:
    """Without the options, twistd's back-off is the one an embedded broker has."""
    assert parse()["backoff"] == Backoff() == Backoff(1000, 2.0, 60_000)


def test_the_options_make_the_backoff() -> None:
    """The three options give the delivery policy's back-off."""
    options = parse(
        "--redelivery-delay",
        "250",
        "--redelivery-multiplier",
        "1.5",
        "--redelivery-max-delay",
        "5000",
    )
    assert options["backoff"] == Backoff(250, 1.5, 5000)


@pytest.mark.parametrize(
    ("argv", "named"),
    [
        (["--redelivery-delay", "-1"], "--redelivery-delay"),
        (["--redelivery-delay", "86400001"], "--redelivery-delay"),
        (["--redelivery-multiplier", "0.9"], "--redelivery-multiplier"),
        (["--redelivery-multiplier", "lots"], "redelivery-multiplier"),
        (["--redelivery-max-delay", "soon"], "redelivery-max-delay"),
    ],
)
def test_values_out_of_range_are_refused(argv: list[str], named: str) -> None:
    """A bad value is a usage error that names its option."""
    with pytest.raises(usage.UsageError, match=named):
        parse(*argv)
