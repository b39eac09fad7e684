"""
Issue 16's queue-side features on the real broker (``twistd -n stompbroker``), driven
by ``stomp.py``: exclusive and prioritised consumers, message groups (also across a
SIGKILL), and queue browsers and their read right, as
docs/destinations.md and docs/cluster.md describe them.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

from tests.support.clients import Collector, connect, flush_deliveries, publish
from tests.support.passwords import secured_module
from tests.support.process import BrokerProcess, BrokerStarter

EXCLUSIVE = {"activemq.exclusive": "true"}
INDIVIDUAL = "client-individual"


def unique(kind: str = "queue") -> str:
    """:returns: a destination no other test uses."""
    return f"/{kind}/c{uuid.uuid4().hex[:10]}"


def grouped(address: tuple[str, int], queue: str, items: list[str], **headers: str) -> None:
    """Send ``GROUP:BODY`` items in order, each in its group, with receipts."""
    connection, events = connect(address)
    for index, item in enumerate(items):
        group, _, body = item.partition(":")
        connection.send(
            queue, body, headers={"JMSXGroupID": group, **headers}, receipt=f"g-{index}"
        )
    assert events.wait_for(lambda: len(events.receipts) == len(items)), events.receipts
    connection.disconnect()


def by_group(collector: Collector) -> dict[str, list[bytes]]:
    """The bodies a consumer got, by their JMSXGroupID."""
    groups: dict[str, list[bytes]] = {}
    for message in collector.messages:
        groups.setdefault(message.headers["JMSXGroupID"], []).append(message.body)
    return groups


def firsts(collector: Collector) -> list[tuple[str, bytes]]:
    """The (group, body) of the messages marked JMSXGroupFirstForConsumer:true."""
    return [
        (message.headers["JMSXGroupID"], message.body)
        for message in collector.messages
        if message.headers.get("JMSXGroupFirstForConsumer") == "true"
    ]


def test_an_exclusive_consumer_takes_all_and_the_next_takes_over(broker: BrokerProcess) -> None:
    """activemq.exclusive: the first gets everything; when it goes, its unacked go to the next."""
    queue = unique()
    first, got_first = connect(broker.address)
    first.subscribe(queue, id="a", ack=INDIVIDUAL, headers=EXCLUSIVE)
    second, got_second = connect(broker.address)
    second.subscribe(queue, id="b", ack=INDIVIDUAL, headers=EXCLUSIVE)
    flush_deliveries(second, got_second)
    publish(broker.address, queue, ["1", "2", "3"])
    assert got_first.wait_for(lambda: got_first.bodies() == [b"1", b"2", b"3"])
    flush_deliveries(second, got_second)
    assert got_second.messages == []
    first.ack(got_first.messages[0].headers["ack"], receipt="acked")
    assert got_first.wait_for(lambda: "acked" in got_first.receipts)
    first.disconnect()
    assert got_second.wait_for(lambda: got_second.bodies() == [b"2", b"3"]), got_second.bodies()
    assert all(m.headers.get("redelivered") == "true" for m in got_second.messages)
    second.disconnect()


def test_single_active_consumer_declared_by_the_first_subscribe(broker: BrokerProcess) -> None:
    """x-single-active-consumer:true on the first SUBSCRIBE: one consumer gets everything."""
    queue = unique()
    first, got_first = connect(broker.address)
    first.subscribe(queue, id="a", headers={"x-single-active-consumer": "true"})
    second, got_second = connect(broker.address)
    second.subscribe(queue, id="b")
    flush_deliveries(second, got_second)
    publish(broker.address, queue, ["1", "2"])
    assert got_first.wait_for(lambda: got_first.bodies() == [b"1", b"2"])
    flush_deliveries(second, got_second)
    assert got_second.messages == []
    first.disconnect()
    second.disconnect()


def test_higher_priority_consumers_are_served_first(broker: BrokerProcess) -> None:
    """x-priority: the higher consumer gets messages while it has room, then the lower."""
    queue = unique()
    low, got_low = connect(broker.address)
    low.subscribe(queue, id="l", ack=INDIVIDUAL)
    high, got_high = connect(broker.address)
    high.subscribe(
        queue, id="h", ack=INDIVIDUAL, headers={"x-priority": "10", "prefetch-count": "2"}
    )
    flush_deliveries(high, got_high)
    publish(broker.address, queue, ["1", "2", "3"])
    assert got_high.wait_for(lambda: got_high.bodies() == [b"1", b"2"]), got_high.bodies()
    assert got_low.wait_for(lambda: got_low.bodies() == [b"3"]), got_low.bodies()
    low.disconnect()
    high.disconnect()


def test_message_groups_stick_to_one_consumer_and_move_when_it_leaves(
    broker: BrokerProcess,
) -> None:
    """JMSXGroupID: a group's messages go to one consumer in order; it moves when that one goes."""
    queue = unique()
    a, got_a = connect(broker.address)
    a.subscribe(queue, id="a")
    b, got_b = connect(broker.address)
    b.subscribe(queue, id="b")
    flush_deliveries(b, got_b)
    grouped(broker.address, queue, ["x:1", "y:1", "x:2", "y:2", "x:3"])
    assert got_a.wait_for(lambda: len(got_a.messages) + len(got_b.messages) == 5)
    flush_deliveries(b, got_b)
    groups = {**by_group(got_a), **by_group(got_b)}
    assert groups == {"x": [b"1", b"2", b"3"], "y": [b"1", b"2"]}
    assert len(by_group(got_a)) == 1 and len(by_group(got_b)) == 1
    assert sorted(firsts(got_a) + firsts(got_b)) == [("x", b"1"), ("y", b"1")]
    owner, other, got_other = (a, b, got_b) if "x" in by_group(got_a) else (b, a, got_a)
    owner.disconnect()
    grouped(broker.address, queue, ["x:4"])
    assert got_other.wait_for(lambda: b"4" in got_other.bodies())
    [moved] = [m for m in got_other.messages if m.body == b"4"]
    assert moved.headers.get("JMSXGroupFirstForConsumer") == "true"
    other.disconnect()


def test_a_browser_sees_what_waits_and_takes_nothing(broker: BrokerProcess) -> None:
    """browser:true gets copies in delivery order then browser:end; a consumer still gets all."""
    queue = unique()
    for body, priority in (("a", "4"), ("b", "9"), ("c", "4")):
        publish(broker.address, queue, [body], priority=priority)
    browser, seen = connect(broker.address)
    browser.subscribe(queue, id="browse", headers={"browser": "true"})
    assert seen.wait_for(lambda: len(seen.messages) == 4), seen.bodies()
    assert seen.bodies() == [b"b", b"a", b"c", b""]
    assert seen.messages[-1].headers["browser"] == "end"
    browser.disconnect()
    consumer, got = connect(broker.address)
    consumer.subscribe(queue, id="c")
    assert got.wait_for(lambda: len(got.messages) == 3), got.bodies()
    assert got.bodies() == [b"b", b"a", b"c"]
    consumer.disconnect()


ACCESS = """
[users.writer]
write = ["/queue/#"]

[users.reader]
read = ["/queue/browsed.#"]

[users.stranger]
read = ["/topic/#"]
"""


#: A writer, a reader of /queue/browsed.# and a stranger to queues.
secured = secured_module(ACCESS, ("writer", "w", ()), ("reader", "r", ()), ("stranger", "s", ()))


def test_browsing_needs_the_read_right(secured: BrokerProcess) -> None:
    """A user with only the read right browses; one without it gets an ERROR naming the right."""
    queue = "/queue/browsed.jobs"
    writer, sent = connect(secured.address, login="writer", passcode="w")
    writer.send(queue, b"job", receipt="sent")
    assert sent.wait_for(lambda: "sent" in sent.receipts)
    reader, seen = connect(secured.address, login="reader", passcode="r")
    reader.subscribe(queue, id="b", headers={"browser": "true"})
    assert seen.wait_for(lambda: len(seen.messages) == 2), seen.bodies()
    assert seen.bodies() == [b"job", b""] and not seen.errors
    stranger, refused = connect(secured.address, login="stranger", passcode="s")
    stranger.subscribe(queue, id="b", headers={"browser": "true"})
    assert refused.wait_for(lambda: bool(refused.errors))
    assert refused.errors[0].headers["message"] == (f"access denied: no read right on '{queue}'")
    assert refused.messages == []
    reader.subscribe(queue, id="again", headers={"browser": "true"})
    assert seen.wait_for(lambda: len(seen.messages) == 4), seen.bodies()
    reader.disconnect()
    writer.disconnect()


def test_groups_survive_a_sigkill(tmp_path: Path, start: BrokerStarter) -> None:
    """
    Persistent grouped messages come back after SIGKILL with their group and priority
    headers, and the groups are assigned again: each to one consumer, in order, marked first.
    """
    data = tmp_path / "data"
    broker = start(data)
    grouped(
        broker.address,
        "/queue/orders",
        ["a:1", "b:1", "c:1", "a:2", "b:2", "c:2"],
        persistent="true",
        priority="7",
    )
    broker.kill()
    broker = start(data)
    try:
        first, got_first = connect(broker.address)
        first.subscribe("/queue/orders", id="1", ack=INDIVIDUAL, headers={"prefetch-count": "1"})
        assert got_first.wait_for(lambda: got_first.bodies() == [b"1"])
        second, got_second = connect(broker.address)
        second.subscribe("/queue/orders", id="2", ack=INDIVIDUAL)
        assert got_second.wait_for(lambda: len(got_second.messages) == 4), got_second.bodies()
        first.ack(got_first.messages[0].headers["ack"])
        assert got_first.wait_for(lambda: len(got_first.messages) == 2), got_first.bodies()
        assert by_group(got_first) == {"a": [b"1", b"2"]}
        assert by_group(got_second) == {"b": [b"1", b"2"], "c": [b"1", b"2"]}
        assert firsts(got_first) == [("a", b"1")]
        assert firsts(got_second) == [("b", b"1"), ("c", b"1")]
        everything: list[Any] = got_first.messages + got_second.messages
        assert {m.headers["priority"] for m in everything} == {"7"}
        first.disconnect()
        second.disconnect()
    finally:
        broker.stop()
