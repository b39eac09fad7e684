"""
Tests of ``twistd stompbroker``'s options (:mod:`stompbroker.app.options`): defaults,
shorthands, and the values each option refuses.
"""

from __future__ import annotations

import pytest
from twisted.python import usage

from stompbroker.app.options import DEFAULT_LISTEN
from stompbroker.broker.flow.broker_limits import QUEUE_MEMORY_SHARE, Limits
from stompbroker.broker.flow.disk_alarm import DiskFreeLimit
from tests.support.options import parse


def test_defaults_listen_on_loopback_61613() -> None:
    """Without --port or --listen the broker listens on 127.0.0.1:61613."""
    assert parse()["listen"] == [DEFAULT_LISTEN] == ["tcp:61613:interface=127.0.0.1"]


def test_port_is_shorthand_for_loopback_tcp_endpoint() -> None:
    """
    --port N means --listen tcp:N:interface=127.0.0.1, because serverFromString rejects bare
    digits.
    """
    assert parse("--port", "7000", "--listen", "tcp:7001")["listen"] == [
        "tcp:7000:interface=127.0.0.1",
        "tcp:7001",
    ]


@pytest.mark.parametrize(
    "argv",
    [
        ["--port", "x"],
        ["--heartbeat", "10"],
        ["--heartbeat", "1,-1"],
        ["--heartbeat-min", "1000"],
        ["--max-frame-size", "0"],
        ["--max-pending-writes", "0"],
        ["--max-connections", "-1"],
        ["--log-level", "loud"],
        ["--resume-window", "-1"],
        ["--resume-buffer", "0"],
        ["--resume-buffer", "lots"],
        ["--stats-stream", "/queue/stats"],
        ["--stats-stream", "/stream/"],
        ["--disk-free-limit", "lots"],
        ["--disk-free-limit", "100%"],
        ["--disk-free-limit", "-5%"],
        ["--disk-free-limit", "-1M"],
        ["--queue-memory", "lots"],
        ["--read-ahead", "0"],
        ["--read-ahead", "many"],
    ],
)
def test_bad_option_values_are_usage_errors(argv: list[str]) -> None:
    """Each option refuses values it cannot use, with a usage error rather than a traceback."""
    with pytest.raises(usage.UsageError):
        parse(*argv)


def test_the_queue_memory_budget_defaults_to_a_share_of_memory_high() -> None:
    """--queue-memory takes a size; without it the tap's Limits derive it from --memory-high."""
    options = parse("--queue-memory", "64M", "--read-ahead", "200")
    assert (options["queue-memory"], options["read-ahead"]) == (64 * 1024 * 1024, 200)
    assert parse()["queue-memory"] is None
    derived = Limits(memory_high=parse("--memory-high", "256M")["memory-high"])
    assert derived.queue_memory_budget == int(256 * 1024 * 1024 * QUEUE_MEMORY_SHARE)
    assert Limits(memory_high=0).queue_memory_budget > 0


def test_the_stats_stream_is_off_unless_named() -> None:
    """--stats-stream takes a /stream/ name; none (the default) appends nothing."""
    assert parse()["stats-stream"] is None
    assert parse("--stats-stream", "none")["stats-stream"] is None
    assert parse("--stats-stream", "/stream/s")["stats-stream"] == "/stream/s"


@pytest.mark.parametrize(
    ("value", "limit"),
    [
        (None, DiskFreeLimit(size=50 << 20)),
        ("2G", DiskFreeLimit(size=2 << 30)),
        ("5%", DiskFreeLimit(share=0.05)),
        ("0", DiskFreeLimit()),
    ],
)
def test_the_disk_free_limit_is_bytes_or_a_share_of_the_filesystem(
    value: str | None, limit: DiskFreeLimit
) -> None:
    """--disk-free-limit takes bytes with a unit or a percentage; 0 turns the alarm off."""
    argv = [] if value is None else ["--disk-free-limit", value]
    assert parse(*argv)["disk-free-limit"] == limit


def test_the_engine_ping_timeout_defaults_to_5_seconds_and_takes_a_number() -> None:
    """--engine-ping-timeout: how long a PING may take before Redis counts as away."""
    assert parse()["engine-ping-timeout"] == 5.0
    assert parse("--engine-ping-timeout", "2.5")["engine-ping-timeout"] == 2.5


@pytest.mark.parametrize("value", ["0", "0.05", "-1", "soon", "inf"])
def test_an_engine_ping_timeout_under_a_tenth_of_a_second_or_not_a_number_is_refused(
    value: str,
) -> None:
    """A PING timeout so short that any pause of Redis would be an outage is a mistake."""
    with pytest.raises(usage.UsageError, match="engine-ping-timeout"):
        parse("--engine-ping-timeout", value)
