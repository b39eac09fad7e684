"""
Per-destination policies against a real broker: set with the ``stompbroker``
command (the management API) and seen by stomp.py clients at once.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.clients import connect, publish
from tests.support.management import cli, managed_broker
from tests.support.process import BrokerProcess


@pytest.fixture(scope="module")
def managed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    work: Path = tmp_path_factory.mktemp("policies")
    process = managed_broker(work, "--policy", "ttl:pattern=ttl.*,apply-to=queues,message-ttl=300")
    yield process
    process.stop()


def _depth(broker: BrokerProcess, destination: str) -> int | None:
    rows = json.loads(cli(broker, "queues", "--json").stdout)
    found = [row["depth"] for row in rows if row["destination"] == destination]
    return found[0] if found else None


def test_reject_publish_is_an_error_naming_the_limit_and_the_policy(
    managed: BrokerProcess,
) -> None:
    done = cli(
        managed,
        "set-policy",
        "cap",
        "cap.>",
        "--max-length",
        "1",
        "--overflow",
        "reject-publish",
        "--apply-to",
        "queues",
    )
    assert done.returncode == 0, done.stderr
    connection, events = connect(managed.address)
    connection.send("/queue/cap.a", "one", receipt="r1")
    assert events.wait_for(lambda: "r1" in events.receipts)
    connection.send("/queue/cap.a", "two", receipt="r2")
    assert events.wait_for(lambda: events.errors)
    [error] = events.errors
    said = error.body.decode() + error.headers.get("message", "")
    assert "max-length 1" in said and "policy cap" in said
    assert _depth(managed, "/queue/cap.a") == 1


def test_a_policy_set_at_run_time_drops_the_head_of_an_existing_queue(
    managed: BrokerProcess,
) -> None:
    publish(managed.address, "/queue/drop.a", ["1", "2", "3"])
    assert _depth(managed, "/queue/drop.a") == 3
    assert cli(managed, "set-policy", "drop", "drop.a", "--max-length", "2").returncode == 0
    listed = json.loads(cli(managed, "policies", "--json").stdout)
    assert "drop" in [policy["name"] for policy in listed]
    publish(managed.address, "/queue/drop.a", ["4"])
    connection, events = connect(managed.address)
    connection.subscribe("/queue/drop.a", "s")
    assert events.wait_for(lambda: len(events.messages) == 2)
    assert [m.body for m in events.messages] == [b"3", b"4"]
    assert cli(managed, "clear-policy", "drop").returncode == 0


def test_message_ttl_from_the_command_line(managed: BrokerProcess) -> None:
    publish(managed.address, "/queue/ttl.a", ["old"])
    time.sleep(0.5)
    publish(managed.address, "/queue/ttl.a", ["new"])
    connection, events = connect(managed.address)
    connection.subscribe("/queue/ttl.a", "s")
    assert events.wait_for(lambda: events.messages)
    time.sleep(0.2)
    assert [m.body for m in events.messages] == [b"new"]


def test_an_unused_queue_expires(managed: BrokerProcess) -> None:
    assert cli(managed, "set-policy", "gone", "gone.*", "--expires", "300").returncode == 0
    publish(managed.address, "/queue/gone.a", ["x"])
    deadline = time.monotonic() + 10
    while _depth(managed, "/queue/gone.a") is not None and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _depth(managed, "/queue/gone.a") is None
