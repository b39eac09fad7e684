"""
Queue features across nodes (docs/cluster.md, docs/destinations.md): a real
``redis-server`` and two ``twistd`` nodes, the producer on one and the
consumers on the other, each feature behaving as on one node.
"""

from __future__ import annotations

import pytest

from tests.support.clients import connect, publish, through
from tests.support.process import BrokerProcess
from tests.support.redis import (  # noqa: F401
    NODE_TIMEOUT,
    RedisServer,
    redis_server,
    registered,
    started_nodes,
    two_nodes,
    unique,
)

pytestmark = pytest.mark.integration

#: The priorities of the issue's example, in the order they are sent.
SENT_PRIORITIES = [5, 2, 6, 0, 1, 8, 1, 5, 9, 0, 8, 3, 0, 1, 6, 6, 1, 3, 1, 8]

#: Seconds a test waits for what the nodes owe it: generous, for a loaded machine.
SLOW = 15.0


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


def test_selectors_on_a_queue_pick_consumers_on_other_nodes(
    nodes: list[BrokerProcess],
    redis_server: RedisServer,  # noqa: F811
) -> None:
    """Each consumer gets exactly the messages its selector selects, whatever node reads them."""
    a, b = nodes
    queue = unique("/queue/selected.")
    red, red_inbox = connect(b.address)
    red.subscribe(queue, id="r", ack="auto", headers={"selector": "color = 'red'"})
    blue, blue_inbox = connect(a.address)
    blue.subscribe(queue, id="b", ack="auto", headers={"selector": "color = 'blue'"})
    registered(redis_server, queue, 2)
    sender, sent = connect(a.address)
    for n in range(20):
        color = "red" if n % 2 else "blue"
        sender.send(queue, f"{color}{n}".encode(), headers={"color": color})
    sender.send(queue, b"red-last", headers={"color": "red"}, receipt="done")
    assert sent.wait_for(lambda: "done" in sent.receipts)
    assert red_inbox.wait_for(lambda: len(red_inbox.messages) == 11), red_inbox.bodies()
    assert blue_inbox.wait_for(lambda: len(blue_inbox.messages) == 10), blue_inbox.bodies()
    assert red_inbox.bodies() == [f"red{n}".encode() for n in range(1, 20, 2)] + [b"red-last"]
    assert blue_inbox.bodies() == [f"blue{n}".encode() for n in range(0, 20, 2)]
    for connection in (red, blue, sender):
        connection.disconnect()


def test_the_highest_priority_consumer_on_another_node_gets_the_messages(
    nodes: list[BrokerProcess],
    redis_server: RedisServer,  # noqa: F811
) -> None:
    """A consumer of priority 10 on B with room gets every message; the plain one on A none."""
    a, b = nodes
    queue = unique("/queue/consumer-priority.")
    high, high_inbox = connect(b.address)
    high.subscribe(queue, id="h", ack="auto", headers={"x-priority": "10"})
    low, low_inbox = connect(a.address)
    low.subscribe(queue, id="l", ack="auto")
    registered(redis_server, queue, 2)
    publish(a.address, queue, [str(n).encode() for n in range(30)])
    assert high_inbox.wait_for(lambda: len(high_inbox.messages) == 30), high_inbox.bodies()
    assert high_inbox.bodies() == [str(n).encode() for n in range(30)]
    assert low_inbox.messages == []
    for connection in (high, low):
        connection.disconnect()


def test_an_exclusive_consumer_on_another_node_gets_everything(
    nodes: list[BrokerProcess],
    redis_server: RedisServer,  # noqa: F811
) -> None:
    """The first exclusive consumer (on B) gets every message; the standby on A waits."""
    a, b = nodes
    queue = unique("/queue/exclusive.")
    first, first_inbox = connect(b.address)
    first.subscribe(queue, id="e", ack="auto", headers={"activemq.exclusive": "true"})
    registered(redis_server, queue, 1)
    standby, standby_inbox = connect(a.address)
    standby.subscribe(queue, id="s", ack="auto", headers={"activemq.exclusive": "true"})
    registered(redis_server, queue, 2)
    publish(a.address, queue, [str(n).encode() for n in range(30)])
    assert first_inbox.wait_for(lambda: len(first_inbox.messages) == 30, SLOW), first_inbox.bodies()
    assert first_inbox.bodies() == [str(n).encode() for n in range(30)]
    # The barrier: a marker decided after the 30 reaches the exclusive consumer too.
    through(first_inbox, (a.address, queue), timeout=SLOW)
    assert standby_inbox.messages == []
    first.disconnect()
    registered(redis_server, queue, 1, exactly=True)
    publish(a.address, queue, [b"after"])
    assert standby_inbox.wait_for(lambda: standby_inbox.bodies() == [b"after"], SLOW), (
        standby_inbox.bodies()
    )
    standby.disconnect()


def test_a_message_group_stays_with_one_consumer_across_nodes(
    nodes: list[BrokerProcess],
    redis_server: RedisServer,  # noqa: F811
) -> None:
    """
    Every message of a group goes to one consumer, in order, whichever node reads
    it: also the first ones, sent to a queue whose plain consumers both nodes
    read the plain way until then (docs/design/cluster.md, "The switch to deciding").
    """
    a, b = nodes
    queue = unique("/queue/groups.")
    inboxes = []
    connections = []
    for process in (a, b):
        connection, inbox = connect(process.address)
        connection.subscribe(queue, id="g", ack="auto")
        inboxes.append(inbox)
        connections.append(connection)
    registered(redis_server, queue, 2)
    sender, sent = connect(a.address)
    groups = [f"g{n}" for n in range(6)]
    for n in range(60):
        group = groups[n % len(groups)]
        sender.send(queue, f"{group}:{n}".encode(), headers={"JMSXGroupID": group})
    sender.send(queue, b"end", receipt="done")
    assert sent.wait_for(lambda: "done" in sent.receipts)
    assert inboxes[0].wait_for(
        lambda: sum(len(inbox.messages) for inbox in inboxes) == 61, timeout=10
    ), [inbox.bodies() for inbox in inboxes]
    owners: dict[str, int] = {}
    for index, inbox in enumerate(inboxes):
        seen: dict[str, list[int]] = {}
        for body in inbox.bodies():
            if body == b"end":
                continue
            group, number = body.decode().split(":")
            assert owners.setdefault(group, index) == index, f"{group} went to two consumers"
            seen.setdefault(group, []).append(int(number))
        for numbers in seen.values():
            assert numbers == sorted(numbers)
    assert set(owners) == set(groups)
    for connection in (*connections, sender):
        connection.disconnect()


def test_a_group_moves_when_its_owners_node_is_killed(
    redis_server: RedisServer,  # noqa: F811
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """SIGKILL of the node of a group's owner: the group, and what it held, go to another node."""
    queue = unique("/queue/groups.kill.")
    with started_nodes(tmp_path_factory, redis_server, "ab") as (a, b):
        owner, owned = connect(b.address)
        owner.subscribe(queue, id="o", ack="client-individual")
        registered(redis_server, queue, 1)
        publish(a.address, queue, [b"1", b"2"], JMSXGroupID="g")
        assert owned.wait_for(lambda: owned.bodies() == [b"1", b"2"])
        heir, inherited = connect(a.address)
        heir.subscribe(queue, id="h", ack="client-individual")
        registered(redis_server, queue, 2)
        publish(a.address, queue, [b"3"], JMSXGroupID="g")
        b.process.kill()
        b.process.wait(timeout=10)
        publish(a.address, queue, [b"4"], JMSXGroupID="g")
        assert inherited.wait_for(
            lambda: sorted(inherited.bodies()) == [b"1", b"2", b"3", b"4"],
            timeout=3 * float(NODE_TIMEOUT) + 3,
        ), inherited.bodies()
        assert inherited.bodies()[-1] == b"4"
        redelivered = {m.body for m in inherited.messages if m.headers.get("redelivered")}
        assert {b"1", b"2"} <= redelivered
        heir.disconnect()


def test_the_standby_takes_over_when_the_exclusive_consumers_node_is_killed(
    redis_server: RedisServer,  # noqa: F811
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """SIGKILL of the exclusive consumer's node: the standby on another node gets the messages."""
    queue = unique("/queue/exclusive.kill.")
    with started_nodes(tmp_path_factory, redis_server, "ab") as (a, b):
        active, got = connect(b.address)
        active.subscribe(
            queue, id="e", ack="client-individual", headers={"activemq.exclusive": "true"}
        )
        registered(redis_server, queue, 1)
        standby, standby_got = connect(a.address)
        standby.subscribe(
            queue, id="s", ack="client-individual", headers={"activemq.exclusive": "true"}
        )
        registered(redis_server, queue, 2)
        publish(a.address, queue, [b"1", b"2"])
        assert got.wait_for(lambda: got.bodies() == [b"1", b"2"])
        assert standby_got.messages == []
        b.process.kill()
        b.process.wait(timeout=10)
        publish(a.address, queue, [b"3"])
        assert standby_got.wait_for(
            lambda: sorted(standby_got.bodies()) == [b"1", b"2", b"3"],
            timeout=3 * float(NODE_TIMEOUT) + 3,
        ), standby_got.bodies()
        standby.disconnect()
