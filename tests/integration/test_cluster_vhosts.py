"""
Virtual hosts across nodes of the redis engine (docs/virtual-hosts.md, "With the
redis engine"): a real ``redis-server`` and two ``twistd`` nodes with the same
virtual host ``shop``; the same queue name in the default host and in ``shop``
is two queues, each produced on node A and consumed on node B, and node A's
management API lists both, each with its virtual host.
"""

from __future__ import annotations

import json
import time
import urllib.request
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import stomp

from tests.support.clients import WAIT, Collector, connect
from tests.support.process import BrokerProcess
from tests.support.redis import NODE_TIMEOUT, RedisServer, node, redis_server  # noqa: F401

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def nodes(
    redis_server: RedisServer,  # noqa: F811
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[list[BrokerProcess]]:
    """Node A (with its web port, for the API) and node B, both serving ``shop``."""
    a = BrokerProcess(
        tmp_path_factory.mktemp("a"),
        "--engine",
        redis_server.url,
        "--node-timeout",
        NODE_TIMEOUT,
        "--vhost",
        "shop",
        reactor="uvloop",
    )
    try:
        b = node(tmp_path_factory.mktemp("b"), redis_server, "--vhost", "shop")
    except BaseException:
        a.stop()
        raise
    try:
        yield [a, b]
    finally:
        a.stop()
        b.stop()


def open_in(address: tuple[str, int], vhost: str | None) -> tuple[Any, Collector]:
    """A ``stomp.py`` connection in ``vhost`` (the default host for ``None``)."""
    if vhost is None:
        return connect(address)
    connection = stomp.Connection12([address], vhost=vhost, auto_decode=False)
    collector = Collector()
    connection.set_listener("collector", collector)
    connection.connect(wait=True)
    return connection, collector


def produce(address: tuple[str, int], vhost: str | None, queue: str, bodies: list[str]) -> None:
    """Send ``bodies`` to ``queue`` of ``vhost``; all are in Redis once the last RECEIPT comes."""
    connection, events = open_in(address, vhost)
    try:
        for body in bodies:
            connection.send(queue, body, headers={"receipt": body})
        assert events.wait_for(lambda: set(bodies) <= set(events.receipts)), events.errors
    finally:
        connection.disconnect()


def listing(url: str) -> list[dict[str, Any]]:
    """:returns: the API's answer at ``url``."""
    with urllib.request.urlopen(url, timeout=WAIT) as response:
        rows: list[dict[str, Any]] = json.loads(response.read())
    return rows


def test_the_same_queue_name_in_two_hosts_is_two_queues_across_nodes(
    nodes: list[BrokerProcess],
) -> None:
    a, b = nodes
    queue = f"/queue/orders.{uuid.uuid4().hex[:8]}"
    home_bodies = [f"home-{n}" for n in range(3)]
    shop_bodies = [f"shop-{n}" for n in range(2)]
    produce(a.address, None, queue, home_bodies)
    produce(a.address, "shop", queue, shop_bodies)

    # A node's view of what waits unread in Redis is refreshed every few seconds.
    url = f"http://127.0.0.1:{a.http_port}/api/destinations"
    expected = [("/", 3), ("shop", 2)]
    deadline = time.monotonic() + 3 * WAIT
    listed: list[tuple[str, int]] = []
    while time.monotonic() < deadline and listed != expected:
        time.sleep(0.2)
        listed = sorted(
            (row["vhost"], row["depth"]) for row in listing(url) if row["destination"] == queue
        )
    assert listed == expected
    shop_rows = listing(f"{url}?vhost=shop")
    assert [(row["vhost"], row["destination"]) for row in shop_rows] == [("shop", queue)]

    consumers = {vhost: open_in(b.address, vhost) for vhost in (None, "shop")}
    try:
        for connection, _ in consumers.values():
            connection.subscribe(queue, id="1", ack="auto")
        home, shop = consumers[None][1], consumers["shop"][1]
        assert home.wait_for(lambda: len(home.messages) >= 3, WAIT), home.bodies()
        assert shop.wait_for(lambda: len(shop.messages) >= 2, WAIT), shop.bodies()
        assert sorted(home.bodies()) == [body.encode() for body in home_bodies]
        assert sorted(shop.bodies()) == [body.encode() for body in shop_bodies]
        assert {m.headers["destination"] for m in home.messages + shop.messages} == {queue}
    finally:
        for connection, _ in consumers.values():
            connection.disconnect()
