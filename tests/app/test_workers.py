"""``--workers``: its options and the pure parts of the supervisor (stompbroker.app.workers)."""

from __future__ import annotations

import json
import socket

import pytest
from twisted.python import usage

from stompbroker.app.workers import ADOPT_VARIABLE, adopted_ports, worker_argv
from tests.support.options import parse

REDIS = "redis://127.0.0.1:6379/0"


def test_workers_need_the_redis_engine() -> None:
    """With the memory engine --workers above 1 is refused, saying why."""
    with pytest.raises(usage.UsageError, match="each process would be a broker of its own"):
        parse("--workers", "2")


@pytest.mark.parametrize(
    "endpoint",
    [["--listen", "ssl:61614:privateKey=k.pem"], ["--http", "unix:/tmp/web.sock"]],
)
def test_workers_share_plain_tcp_ports_only(endpoint: list[str]) -> None:
    """A TLS or UNIX endpoint cannot be shared by workers: a usage error names it."""
    with pytest.raises(usage.UsageError, match="plain TCP ports only"):
        parse("--engine", REDIS, "--workers", "2", *endpoint)


def test_workers_on_tcp_ports_with_redis_are_accepted() -> None:
    """--workers 4 with the redis engine on TCP ports parses, keeping the arguments as given."""
    options = parse("--engine", REDIS, "--workers", "4", "--port", "7000")
    assert options["workers"] == 4
    assert options.argv[-2:] == ["--port", "7000"]


def test_a_worker_runs_the_same_options_without_workers() -> None:
    """A worker gets every option but --workers (in either spelling), and --workers 1 last."""
    argv = ["--engine", REDIS, "--workers", "3", "--port", "7000", "--workers=3"]
    assert worker_argv(argv) == ["--engine", REDIS, "--port", "7000", "--workers=1"]


def test_adopted_ports_are_read_from_the_environment() -> None:
    """A worker learns which inherited descriptor serves which endpoint; none on its own."""
    environ = {ADOPT_VARIABLE: json.dumps({"tcp:7000": [5, int(socket.AF_INET)]})}
    assert adopted_ports(environ) == {"tcp:7000": (5, socket.AF_INET)}
    assert adopted_ports({}) == {}
