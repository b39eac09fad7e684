"""
Policies set at run time reach every node of the redis engine: a real
``redis-server`` and ``twistd`` nodes; a policy set through node A's API is in
force on node B at once and on a node started later; clearing it on B clears it
on A; each node keeps its own configuration's policies (docs/policies.md, "With
the redis engine").
"""

from __future__ import annotations

import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.clients import connect
from tests.support.policy_calls import call, eventually, names
from tests.support.process import BrokerProcess
from tests.support.redis import RedisServer, redis_server  # noqa: F401


@pytest.fixture(scope="module")
def nodes(
    redis_server: RedisServer,  # noqa: F811
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[list[BrokerProcess]]:
    """Nodes A and B on one Redis; A's configuration has a policy of its own."""
    started = [
        BrokerProcess(
            tmp_path_factory.mktemp("a"),
            "--engine",
            redis_server.url,
            "--policy",
            "own:pattern=own.>,max-length=7",
            reactor="uvloop",
        ),
        BrokerProcess(tmp_path_factory.mktemp("b"), "--engine", redis_server.url, reactor="uvloop"),
    ]
    try:
        yield started
    finally:
        for process in started:
            process.stop()


def policy_of(process: BrokerProcess, destination: str) -> Any:
    quoted = urllib.request.quote(destination, safe="")
    status, answer = call(process, "GET", f"destinations/{quoted}")
    assert status == 200, answer
    return answer["policy"]


def test_a_policy_set_on_one_node_is_in_force_on_every_node(
    nodes: list[BrokerProcess],
    redis_server: RedisServer,  # noqa: F811
    tmp_path: Any,
) -> None:
    a, b = nodes
    # A node holds a handle on a shared queue while it has a consumer there.
    connection, inbox = connect(b.address)
    connection.subscribe("/queue/shared.orders", id="1", receipt="subscribed")
    assert inbox.wait_for(lambda: "subscribed" in inbox.receipts)
    try:
        check_sharing(a, b, redis_server, tmp_path)
    finally:
        connection.disconnect()


def check_sharing(
    a: BrokerProcess,
    b: BrokerProcess,
    redis_server: RedisServer,  # noqa: F811
    tmp_path: Any,
) -> None:
    assert names(a) == ["own"] and names(b) == []
    assert policy_of(b, "/queue/shared.orders") is None

    status, answer = call(
        a,
        "PUT",
        "policies/shared",
        {
            "pattern": "shared.>",
            "apply-to": "queues",
            "definition": {"prefetch": 3},
        },
    )
    assert status == 200, answer
    eventually(lambda: names(b) == ["shared"])
    assert policy_of(b, "/queue/shared.orders") == "shared"
    status, listed = call(b, "GET", "policies")
    assert listed[0]["definition"] == {"prefetch": 3}
    assert names(a) == ["own", "shared"]

    later = BrokerProcess(tmp_path, "--engine", redis_server.url, reactor="uvloop")
    try:
        assert names(later) == ["shared"]
        status, answer = call(b, "DELETE", "policies/shared")
        assert status == 200, answer
        eventually(lambda: names(a) == ["own"] and names(later) == [])
        assert names(b) == []
    finally:
        later.stop()


def test_a_configuration_policy_cleared_at_run_time_stays_cleared_on_a_node_started_later(
    nodes: list[BrokerProcess],
    redis_server: RedisServer,  # noqa: F811
    tmp_path: Any,
) -> None:
    a, _ = nodes
    status, answer = call(a, "DELETE", "policies/own")
    assert status == 200, answer
    assert names(a) == []
    later = BrokerProcess(
        tmp_path,
        "--engine",
        redis_server.url,
        "--policy",
        "own:pattern=own.>,max-length=7",
        reactor="uvloop",
    )
    try:
        assert names(later) == []
    finally:
        later.stop()
