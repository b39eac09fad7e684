"""
Tests of ``twistd stompbroker``'s options (:mod:`stompbroker.app.options`): defaults,
shorthands, and the values each option refuses.
"""

from __future__ import annotations

import pytest
from twisted.python import usage

from stompbroker.app.options import DEFAULT_LISTEN
from stompbroker.broker.flow.limits import QUEUE_MEMORY_SHARE, Limits
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
