"""
Settling and redelivery counts across nodes, for real (docs/design/cluster.md, "A node
that was stopped, not killed", "Liveness and dead nodes"): a node cut from Redis
past ``--node-timeout`` whose late acknowledgements must end nothing that another
node claimed meanwhile, and a message whose ``redelivery-count`` survives two
nodes dying in turn.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from benchmarks.faults.servers import Proxy
from tests.support.clients import Collector, connect, publish
from tests.support.process import BrokerProcess
from tests.support.redis import NODE_TIMEOUT, RedisServer, node, redis_server  # noqa: F401

#: Long enough for a dead node's key to expire and another node to claim its entries.
CLAIMED_WITHIN = 3 * float(NODE_TIMEOUT) + 4


@pytest.fixture
def client(redis_server: RedisServer) -> Iterator[redis.Redis]:  # noqa: F811
    connection = redis.Redis(port=redis_server.port)
    yield connection
    connection.close()


def subscribed(process: BrokerProcess, queue: str, **headers: str) -> tuple[Any, Collector]:
    """A ``client-individual`` consumer of ``queue`` on ``process``, subscribed for sure."""
    connection, inbox = connect(process.address)
    connection.subscribe(
        queue, id="s", ack="client-individual", headers=dict(headers, receipt="subscribed")
    )
    assert inbox.wait_for(lambda: "subscribed" in inbox.receipts)
    return connection, inbox


def recorded(server: RedisServer, count: int) -> None:
    """
    Wait until a node's redelivery record in Redis says ``count``: the record
    goes through the node's writer after the NACK, so a node killed in the
    milliseconds between would leave the count one short (docs/cluster.md).
    """
    connection = redis.Redis(port=server.port)
    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            for key in connection.scan_iter(match="*:redeliveries:*"):
                if str(count).encode() in connection.hvals(key):
                    return
            time.sleep(0.02)
        raise AssertionError(f"no redelivery record of {count} reached Redis")
    finally:
        connection.close()


def test_a_cut_off_nodes_late_acknowledgements_end_nothing_another_node_claimed(
    redis_server: RedisServer,  # noqa: F811
    client: redis.Redis,
    tmp_path: Path,
) -> None:
    """
    Node B's consumer acknowledges its messages just after B is cut from Redis; the
    acknowledgements wait in B's writer while B's key expires and node A claims and
    delivers the messages.  When B reaches Redis again they end none of A's entries,
    and B says so; A's consumer's own acknowledgements end them.
    """
    proxy = Proxy(redis_server.port)
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    a = node(tmp_path / "a", redis_server)
    b = BrokerProcess(
        tmp_path / "b", "--engine", proxy.url, "--node-timeout", NODE_TIMEOUT, reactor="uvloop"
    )
    queue = f"/queue/settle.{uuid.uuid4().hex[:8]}"
    stream = f"stompbroker:{{q:{queue}}}"
    try:
        holder, held = subscribed(b, queue, **{"prefetch-count": "3"})
        publish(a.address, queue, [b"m0", b"m1", b"m2"])
        assert held.wait_for(lambda: len(held.messages) == 3, timeout=10)
        taker, taken = subscribed(a, queue)
        proxy.cut()
        for message in held.messages:
            holder.ack(message.headers["ack"])
        assert taken.wait_for(lambda: len(taken.messages) == 3, timeout=CLAIMED_WITHIN)
        assert {m.headers.get("redelivered") for m in taken.messages} == {"true"}
        proxy.heal()
        deadline = time.monotonic() + 20
        while "(3 so far)" not in b.log() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert "(3 so far)" in b.log()
        # A's three entries are still A's, in the stream and pending to A alone.
        assert client.xlen(stream) == 3
        summary = client.xpending(stream, "nodes")
        assert summary["pending"] == 3 and len(summary["consumers"]) == 1
        for message in taken.messages:
            taker.ack(message.headers["ack"], receipt=f"acked-{message.body.decode()}")
        assert taken.wait_for(lambda: len([r for r in taken.receipts if "acked" in r]) == 3)
        deadline = time.monotonic() + 5
        while client.xlen(stream) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert client.xlen(stream) == 0
        assert not held.disconnected and held.errors == []
        holder.disconnect()
        taker.disconnect()
    finally:
        a.stop()
        b.stop()
        proxy.close()


def test_a_messages_redelivery_count_survives_two_nodes_dying_in_turn(
    redis_server: RedisServer,  # noqa: F811
    tmp_path: Path,
) -> None:
    """
    Node B's consumer NACKs a message twice (count 2) and B is killed: node C
    claims it and delivers it with count 3; C is killed: node A delivers it with
    count 4, as one node would after four returns.
    """
    nodes = {}
    for name in "abc":
        (tmp_path / name).mkdir()
        nodes[name] = node(tmp_path / name, redis_server)
    a, b, c = nodes["a"], nodes["b"], nodes["c"]
    queue = f"/queue/count.{uuid.uuid4().hex[:8]}"
    try:
        first, on_b = subscribed(b, queue, **{"prefetch-count": "1", "redelivery-delay": "0"})
        publish(a.address, queue, [b"job"])
        for count in (1, 2):
            assert on_b.wait_for(lambda n=count: len(on_b.messages) == n, timeout=10)
            first.nack(on_b.messages[-1].headers["ack"])
        assert on_b.wait_for(lambda: len(on_b.messages) == 3, timeout=10)
        assert on_b.messages[-1].headers["redelivery-count"] == "2"
        recorded(redis_server, 2)
        second, on_c = subscribed(c, queue)
        b.kill()
        assert on_c.wait_for(lambda: len(on_c.messages) == 1, timeout=CLAIMED_WITHIN)
        assert on_c.messages[0].headers["redelivery-count"] == "3"
        recorded(redis_server, 3)
        third, on_a = subscribed(a, queue)
        c.kill()
        assert on_a.wait_for(lambda: len(on_a.messages) == 1, timeout=CLAIMED_WITHIN)
        assert on_a.messages[0].body == b"job"
        assert on_a.messages[0].headers["redelivery-count"] == "4"
        third.disconnect()
    finally:
        for process in nodes.values():
            process.stop()


@pytest.mark.parametrize("decider", ["holder", "other"])
def test_a_selected_messages_redelivery_count_survives_its_nodes_death(
    redis_server: RedisServer,  # noqa: F811
    tmp_path: Path,
    decider: str,
) -> None:
    """
    With selectors one node decides who gets each message: node B keeps it (B
    decides), or node C moves it to B's own stream (C decides, its first consumer
    selecting other messages).  NACKed twice on B, it comes back on C after B is
    killed with count 3: claimed from B, or handed back from B's own stream.
    """
    nodes = {}
    for name in "abc":
        (tmp_path / name).mkdir()
        nodes[name] = node(tmp_path / name, redis_server)
    a, b, c = nodes["a"], nodes["b"], nodes["c"]
    queue = f"/queue/selected.{uuid.uuid4().hex[:8]}"
    red = {"selector": "color = 'red'"}
    try:
        if decider == "other":
            blue, _ = subscribed(c, queue, selector="color = 'blue'")
            time.sleep(0.5)  # C reads first: it holds the lease and decides
        first, on_b = subscribed(b, queue, **red, **{"redelivery-delay": "0"})
        publish(a.address, queue, [b"job"], color="red")
        for count in (1, 2):
            assert on_b.wait_for(lambda n=count: len(on_b.messages) == n, timeout=10)
            first.nack(on_b.messages[-1].headers["ack"])
        assert on_b.wait_for(lambda: len(on_b.messages) == 3, timeout=10)
        assert on_b.messages[-1].headers["redelivery-count"] == "2"
        recorded(redis_server, 2)
        second, on_c = subscribed(c, queue, **red)
        b.kill()
        assert on_c.wait_for(lambda: len(on_c.messages) == 1, timeout=CLAIMED_WITHIN)
        assert on_c.messages[0].body == b"job"
        assert on_c.messages[0].headers["redelivery-count"] == "3"
        taken = "handed back 1 messages" if decider == "other" else "took over 1 messages"
        deadline = time.monotonic() + 5  # logged once the claim is done
        while taken not in c.log() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert taken in c.log()
        second.disconnect()
    finally:
        for process in nodes.values():
            process.stop()
