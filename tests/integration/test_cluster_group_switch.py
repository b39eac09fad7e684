"""
The switch of a queue read the plain way to deciding, when its first grouped
message comes (docs/design/cluster.md, "The switch to deciding"): a real
``redis-server`` and two ``twistd`` nodes, every consumer plain, and a group's
messages must reach its one owner in the order they were sent.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.clients import Collector, connect
from tests.support.process import BrokerProcess
from tests.support.redis import (  # noqa: F401
    RedisServer,
    redis_server,
    registered,
    two_nodes,
    unique,
)

pytestmark = pytest.mark.integration

#: Seconds a test waits for what the nodes owe it: generous, for a loaded machine.
WAIT = 15.0


class Acking(Collector):
    """A collector that acknowledges each message as it comes (``client-individual``)."""

    connection: Any = None

    def on_message(self, frame: Any) -> None:
        super().on_message(frame)
        self.connection.ack(frame.headers["ack"])


def owners_and_orders(inboxes: list[Collector]) -> dict[str, int]:
    """
    :returns: group -> the index of the one consumer that got its messages;
        fails if a group went to two consumers or came out of order.
    """
    owners: dict[str, int] = {}
    for index, inbox in enumerate(inboxes):
        seen: dict[str, list[int]] = {}
        for body in inbox.bodies():
            if body in (b"end", b"first"):
                continue
            group, number = body.decode().split(":")
            assert owners.setdefault(group, index) == index, f"{group} went to two consumers"
            seen.setdefault(group, []).append(int(number))
        for group, numbers in seen.items():
            assert numbers == sorted(numbers), (group, [i.bodies() for i in inboxes])
    return owners


@pytest.mark.parametrize("lanes", [False, True])
def test_a_plain_queues_first_groups_keep_their_order_across_nodes(
    nodes: list[BrokerProcess],
    redis_server: RedisServer,  # noqa: F811
    lanes: bool,
) -> None:
    """
    Four plain consumers on two nodes read a queue the plain way (with
    ``lanes``, its priority lanes: a message of priority 9 came first); 60
    grouped messages of 6 groups come while they read: each group goes to one
    consumer, in the order sent, also its first messages, read by both nodes at
    the switch.
    """
    a, b = nodes
    queue = unique("/queue/groups.plain.")
    inboxes: list[Collector] = []
    connections = []
    acks = ((a, "auto"), (b, "client-individual"), (a, "client-individual"), (b, "auto"))
    for process, ack in acks:
        collector = Acking() if ack != "auto" else Collector()
        connection, inbox = connect(process.address, collector=collector)
        collector.connection = connection
        connection.subscribe(queue, id="g", ack=ack)
        inboxes.append(inbox)
        connections.append(connection)
    registered(redis_server, queue, 4)
    sender, sent = connect(a.address)
    first = 0
    if lanes:
        sender.send(queue, b"first", headers={"priority": "9"}, receipt="first")
        assert sent.wait_for(lambda: "first" in sent.receipts, WAIT)
        assert inboxes[0].wait_for(lambda: any(i.messages for i in inboxes), WAIT)
        first = 1
    groups = [f"g{n}" for n in range(6)]
    for n in range(60):
        group = groups[n % len(groups)]
        sender.send(queue, f"{group}:{n}".encode(), headers={"JMSXGroupID": group})
    sender.send(queue, b"end", receipt="done")
    assert sent.wait_for(lambda: "done" in sent.receipts, WAIT)
    assert inboxes[0].wait_for(
        lambda: sum(len(inbox.messages) for inbox in inboxes) == 61 + first, WAIT
    ), [inbox.bodies() for inbox in inboxes]
    assert set(owners_and_orders(inboxes)) == set(groups)
    for connection in (*connections, sender):
        connection.disconnect()
