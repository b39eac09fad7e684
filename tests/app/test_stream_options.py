"""
``--stream-max-age`` and ``--stream-max-bytes`` (:mod:`stompbroker.app.stream_options`):
their defaults, RabbitMQ's age units, sizes with units, and refused values.
"""

from __future__ import annotations

import pytest
from twisted.python import usage

from stompbroker.broker.streams.offsets import DEFAULT_MAX_AGE, DEFAULT_MAX_BYTES, StreamLimits
from tests.support.options import parse


def test_the_defaults_are_seven_days_and_256_mib() -> None:
    """Without the options each stream keeps 7 days and 256 MiB, as documented."""
    limits = parse()["stream-limits"]
    assert limits == StreamLimits(max_age=DEFAULT_MAX_AGE, max_bytes=DEFAULT_MAX_BYTES)
    assert (limits.max_age, limits.max_bytes) == (7 * 86400, 256 * 1024 * 1024)


@pytest.mark.parametrize(
    ("age", "seconds"),
    [
        ("90", 90),
        ("1.5", 1.5),
        ("30s", 30),
        ("10m", 600),
        ("2h", 7200),
        ("7D", 604800),
        ("1M", 30 * 86400),
        ("1Y", 365 * 86400),
        ("0", 0),
    ],
)
def test_an_age_takes_seconds_or_rabbitmq_units(age: str, seconds: float) -> None:
    """--stream-max-age reads plain seconds and RabbitMQ's x-max-age units."""
    assert parse("--stream-max-age", age)["stream-limits"].max_age == seconds


def test_a_size_takes_units() -> None:
    """--stream-max-bytes reads sizes as the other size options do."""
    assert parse("--stream-max-bytes", "2G")["stream-limits"].max_bytes == 2 * 1024**3


@pytest.mark.parametrize(
    "argv",
    [
        ["--stream-max-age", "soon"],
        ["--stream-max-age", "-1D"],
        ["--stream-max-age", "3w"],
        ["--stream-max-bytes", "0"],
        ["--stream-max-bytes", "lots"],
    ],
)
def test_bad_stream_options_are_usage_errors(argv: list[str]) -> None:
    """A value that is not an age or a positive size stops the broker with a usage error."""
    with pytest.raises(usage.UsageError, match="stream-max"):
        parse(*argv)
