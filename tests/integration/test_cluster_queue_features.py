"""
Queue features across nodes (docs/cluster.md, docs/destinations.md): a real
``redis-server`` and two ``twistd`` nodes, the producer on one and the
consumers on the other, each feature behaving as on one node.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from tests.support.clients import connect, publish
from tests.support.process import BrokerProcess
from tests.support.redis import RedisServer, redis_server, started_nodes  # noqa: F401

pytestmark = pytest.mark.integration

#: The priorities of the issue's example, in the order they are sent.
SENT_PRIORITIES = [5, 2, 6, 0, 1, 8, 1, 5, 9, 0, 8, 3, 0, 1, 6, 6, 1, 3, 1, 8]


@pytest.fixture(scope="module")
def nodes(
    redis_server: RedisServer,  # noqa: F811
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[list[BrokerProcess]]:
    """Two nodes, A (producers) and B (consumers), on one Redis server."""
    with started_nodes(tmp_path_factory, redis_server, "ab") as started:
        yield started


def unique(prefix: str) -> str:
    return f"{prefix}{uuid.uuid4().hex[:8]}"


def take_one_at_a_time(address: tuple[str, int], queue: str, count: int) -> list[object]:
    """Consume ``count`` messages with a window of one, acknowledging each: their order."""
    consumer, inbox = connect(address)
    consumer.subscribe(queue, id="c", ack="client-individual", headers={"prefetch-count": 1})
    for n in range(count):
        assert inbox.wait_for(lambda n=n: len(inbox.messages) > n), inbox.bodies()
        consumer.ack(inbox.messages[n].headers["ack"])
    consumer.disconnect()
    return inbox.messages


@pytest.mark.parametrize("persistent", ["false", "true"])
def test_waiting_messages_leave_by_priority_across_nodes(
    nodes: list[BrokerProcess], persistent: str
) -> None:
    """
    Messages sent on A wait in Redis; a consumer on B gets them highest priority
    first, FIFO within one (docs/destinations.md, "Message priority").
    """
    a, b = nodes
    queue = unique("/queue/prio.")
    sender, sent = connect(a.address)
    for index, priority in enumerate(SENT_PRIORITIES):
        sender.send(
            queue,
            f"{priority}-{index}".encode(),
            headers={"priority": str(priority), "persistent": persistent},
            receipt=f"r{index}",
        )
    assert sent.wait_for(lambda: len(sent.receipts) == len(SENT_PRIORITIES))
    sender.disconnect()
    got = take_one_at_a_time(b.address, queue, len(SENT_PRIORITIES))
    bodies = [m.body.decode() for m in got]
    expected = sorted(
        (f"{p}-{i}" for i, p in enumerate(SENT_PRIORITIES)),
        key=lambda body: (-int(body.split("-")[0]), int(body.split("-")[1])),
    )
    assert bodies == expected


def test_priority_messages_a_dead_node_held_come_back(nodes: list[BrokerProcess]) -> None:
    """A message of a lane taken and not acknowledged returns when its consumer leaves."""
    a, b = nodes
    queue = unique("/queue/prio.back.")
    publish(a.address, queue, [b"high"], priority="9")
    holder, held = connect(b.address)
    holder.subscribe(queue, id="h", ack="client-individual")
    assert held.wait_for(lambda: held.bodies() == [b"high"])
    holder.disconnect()
    got = take_one_at_a_time(a.address, queue, 1)
    assert got[0].body == b"high"
    assert got[0].headers.get("redelivered") == "true"
