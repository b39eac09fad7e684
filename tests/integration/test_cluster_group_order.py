"""
A group's order when its owner leaves, and ungrouped messages spread, across
nodes as on one node (docs/design/cluster.md, "Selectors, consumer priorities,
exclusive consumers and message groups"): a real ``redis-server``, two
``twistd`` nodes, and a broker of the local engine whose outcome the cluster
must match.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import Any

import pytest
import redis

from stompbroker.broker.engine.redis.queue_reading import READ_BLOCK_MS
from tests.support.clients import MARKER_HEADER, Collector, connect, publish
from tests.support.process import BrokerProcess
from tests.support.redis import (  # noqa: F401
    NODE_TIMEOUT,
    RedisServer,
    one_node,
    redis_server,
    started_nodes,
    two_nodes,
    unique,
)

pytestmark = pytest.mark.integration

#: Seconds a test waits for what the nodes owe it: generous, for a loaded machine.
WAIT = 15.0


#: The consumers' priority: the same for all, so round-robin as plain ones,
#: but not plain, so that the nodes decide from the registry from the start.
PRIORITY = {"x-priority": 1}


def registry_barrier(server: RedisServer | None, queue: str) -> Callable[[int], None]:
    """
    :returns: a wait until ``count`` consumers of ``queue`` are in the shared
        registry, and every node has read it: a node's read ends within
        :data:`READ_BLOCK_MS` and reads the registry's version after it
        (docs/cluster.md).  Nothing to wait for on one node (``server`` ``None``).
    """

    def wait(count: int) -> None:
        if server is None:
            return
        client = redis.Redis(port=server.port)
        deadline = time.monotonic() + WAIT
        try:
            while client.hlen(f"stompbroker:{{q:{queue}}}:consumers") != count:
                assert time.monotonic() < deadline, "the registry never had the consumers"
                time.sleep(0.02)
        finally:
            client.close()
        time.sleep(2 * READ_BLOCK_MS / 1000)

    return wait


def subscribe(
    address: tuple[str, int], queue: str, name: str, ack: str = "auto", **headers: Any
) -> tuple[Any, Collector]:
    """A consumer of ``queue`` whose SUBSCRIBE the broker has handled (its receipt came)."""
    connection, inbox = connect(address)
    connection.subscribe(queue, id=name, ack=ack, headers=headers, receipt=f"on-{name}")
    assert inbox.wait_for(lambda: f"on-{name}" in inbox.receipts, WAIT)
    return connection, inbox


def seen(inbox: Collector) -> list[tuple[str, bool, bool]]:
    """:returns: each message's body, whether redelivered, whether first of its group here."""
    return [
        (
            message.body.decode(),
            message.headers.get("redelivered") == "true",
            message.headers.get("JMSXGroupFirstForConsumer") == "true",
        )
        for message in inbox.messages
    ]


def owner_leaves(
    queue: str,
    plain: tuple[str, int],
    owners: tuple[str, int],
    wait: Callable[[int], None],
    how: str,
) -> dict[str, list[tuple[str, bool, bool]]]:
    """
    ``other`` (on ``plain``) takes group h, ``owner`` (on ``owners``, a window
    of 3, acknowledging nothing) group g, and ``full`` (beside the owner, a
    window of 1) group k; g1..g10 are sent, the owner leaves (``how``), g11 and
    g12 follow, and ``full`` acknowledges its message.

    :returns: what ``other`` and ``full`` received.
    """
    other, other_got = subscribe(plain, queue, "other", **PRIORITY)
    wait(1)
    owner, owned = subscribe(
        owners, queue, "owner", "client-individual", **{"prefetch-count": 3}, **PRIORITY
    )
    wait(2)
    full, full_got = subscribe(
        owners, queue, "full", "client-individual", **{"prefetch-count": 1}, **PRIORITY
    )
    wait(3)
    publish(plain, queue, [b"h1"], JMSXGroupID="h")
    publish(plain, queue, [b"g1"], JMSXGroupID="g")
    publish(plain, queue, [b"k1"], JMSXGroupID="k")
    publish(plain, queue, [f"g{n}".encode() for n in range(2, 11)], JMSXGroupID="g")
    assert owned.wait_for(lambda: len(owned.messages) == 3, WAIT), owned.bodies()
    assert owned.bodies() == [b"g1", b"g2", b"g3"]
    assert full_got.wait_for(lambda: full_got.bodies() == [b"k1"], WAIT), full_got.bodies()
    if how == "unsubscribe":
        owner.unsubscribe("owner", receipt="off")
        assert owned.wait_for(lambda: "off" in owned.receipts, WAIT)
    else:
        owner.disconnect()
    publish(plain, queue, [b"g11", b"g12"], JMSXGroupID="g")
    assert other_got.wait_for(lambda: len(other_got.messages) == 13, WAIT), other_got.bodies()
    full.ack(full_got.messages[0].headers["ack"])
    # The barriers: a marker in each group comes after everything of it.
    for group, inbox in (("g", other_got), ("k", full_got)):
        token = uuid.uuid4().hex
        publish(plain, queue, [b"marker"], JMSXGroupID=group, **{MARKER_HEADER: token})
        markers = inbox.markers
        assert inbox.wait_for(lambda t=token, m=markers: t in m, WAIT), inbox.bodies()
    got = {"other": seen(other_got), "full": seen(full_got)}
    for connection in (owner, other, full):
        if connection.is_connected():
            connection.disconnect()
    return got


@pytest.mark.parametrize("how", ["unsubscribe", "disconnect"])
def test_a_leaving_owners_messages_reach_the_groups_next_owner_first(
    nodes: list[BrokerProcess],
    one_node: BrokerProcess,  # noqa: F811
    redis_server: RedisServer,  # noqa: F811
    how: str,
) -> None:
    """
    The owner (on B) of group g holds g1..g3 unacknowledged, and g4..g10 wait for
    it unread on B; it leaves: the group's next owner by one node's round-robin
    (the consumer beside it is full: the one on A) gets g1..g3 redelivered, then
    g4..g12, in order, as on one node.
    """
    a, b = nodes
    alone = one_node.address
    on_one_node = owner_leaves(unique("/queue/order."), alone, alone, lambda count: None, how)
    expected = [("h1", False, True)] + [(f"g{n}", n <= 3, n == 1) for n in range(1, 13)]
    assert on_one_node == {"other": expected, "full": [("k1", False, True)]}
    queue = unique("/queue/order.")
    wait = registry_barrier(redis_server, queue)
    assert owner_leaves(queue, a.address, b.address, wait, how) == on_one_node


def test_a_dead_owners_messages_reach_the_groups_next_owner_first(
    redis_server: RedisServer,  # noqa: F811
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """
    The owner's node (B) is SIGKILLed holding g1..g3 unacknowledged and g4..g10
    for it; g11, g12 are sent after: the consumer on A gets them all, in order,
    g1..g3 redelivered, as on one node when the owner's connection drops.
    """
    queue = unique("/queue/order.kill.")
    wait = registry_barrier(redis_server, queue)
    with started_nodes(tmp_path_factory, redis_server, "ab") as (a, b):
        heir, heir_got = subscribe(a.address, queue, "heir", **PRIORITY)
        wait(1)
        owner, owned = subscribe(
            b.address, queue, "owner", "client-individual", **{"prefetch-count": 3}, **PRIORITY
        )
        wait(2)
        publish(a.address, queue, [b"h1"], JMSXGroupID="h")
        publish(a.address, queue, [f"g{n}".encode() for n in range(1, 11)], JMSXGroupID="g")
        assert owned.wait_for(lambda: len(owned.messages) == 3, WAIT), owned.bodies()
        b.process.kill()
        b.process.wait(timeout=10)
        publish(a.address, queue, [b"g11", b"g12"], JMSXGroupID="g")
        assert heir_got.wait_for(
            lambda: len(heir_got.messages) == 13, 3 * float(NODE_TIMEOUT) + WAIT
        ), heir_got.bodies()
        expected = [("h1", False, True)] + [(f"g{n}", n <= 3, n == 1) for n in range(1, 13)]
        assert seen(heir_got) == expected
        heir.disconnect()


def spread(
    queue: str, first: tuple[str, int], second: tuple[str, int], wait: Callable[[int], None]
) -> dict[str, list[str]]:
    """
    Three consumers of one priority (5, so that a cluster decides), two on
    ``first`` and one on ``second``, and 30 messages: :returns: what each got.
    """
    inboxes = {}
    connections = []
    for count, (name, address) in enumerate((("c1", first), ("c2", first), ("c3", second)), 1):
        connection, inbox = subscribe(address, queue, name, **{"x-priority": 5})
        wait(count)
        inboxes[name] = inbox
        connections.append(connection)
    publish(second, queue, [str(n).encode() for n in range(30)])
    total = inboxes["c1"]
    assert total.wait_for(
        lambda: sum(len(inbox.messages) for inbox in inboxes.values()) == 30, WAIT
    ), {name: inbox.bodies() for name, inbox in inboxes.items()}
    for connection in connections:
        connection.disconnect()
    return {name: [m.body.decode() for m in inbox.messages] for name, inbox in inboxes.items()}


def test_ungrouped_messages_spread_over_every_nodes_consumers_as_on_one_node(
    nodes: list[BrokerProcess],
    one_node: BrokerProcess,  # noqa: F811
    redis_server: RedisServer,  # noqa: F811
) -> None:
    """
    Round-robin among the consumers of the highest priority with room, whatever
    their node: two consumers on B and one on A get a third each, in turn.
    """
    a, b = nodes
    alone = one_node.address
    on_one_node = spread(unique("/queue/spread."), alone, alone, lambda count: None)
    assert on_one_node == {
        name: [str(n) for n in range(turn, 30, 3)] for turn, name in enumerate(("c1", "c2", "c3"))
    }
    queue = unique("/queue/spread.")
    assert spread(queue, b.address, a.address, registry_barrier(redis_server, queue)) == (
        on_one_node
    )
