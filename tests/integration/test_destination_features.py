"""
Issue 16's destination features on the real broker (``twistd -n stompbroker``),
driven by ``stomp.py``: selectors, message priority, composite destinations,
exclusive and prioritised consumers, message groups, browsing, retained messages
and scheduled delivery, as docs/destinations.md describes them.

Tests that need no store share the module's broker (``broker``, from the
package's conftest), each on destinations of its own; those that restart a
broker with a data directory start their own.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

from tests.support.clients import connect, flush_deliveries, publish
from tests.support.process import BrokerProcess, BrokerStarter

PERSISTENT = {"persistent": "true"}


def unique(kind: str) -> str:
    """:returns: a destination of the kind no other test uses."""
    return f"/{kind}/f{uuid.uuid4().hex[:10]}"


def test_selectors_filter_topic_and_queue_subscriptions(broker: BrokerProcess) -> None:
    """A selector picks a topic subscription's messages; on a queue the others wait."""
    topic, queue = unique("topic"), unique("queue")
    connection, collector = connect(broker.address)
    connection.subscribe(topic, id="t", headers={"selector": "region = 'eu'"})
    connection.subscribe(queue, id="q", headers={"selector": "amount > 10"})
    flush_deliveries(connection, collector)
    publish(broker.address, topic, ["eu", "us"], region="eu")
    for amount in ("5", "50"):
        publish(broker.address, queue, [amount], amount=amount)
    publish(broker.address, topic, ["us"], region="us")
    flush_deliveries(connection, collector)
    assert sorted(collector.bodies()) == [b"50", b"eu", b"us"]
    connection.disconnect()
    other, others = connect(broker.address)
    other.subscribe(queue, id="rest")
    assert others.wait_for(lambda: others.bodies() == [b"5"]), others.bodies()
    other.disconnect()


def test_a_bad_selector_is_an_error(broker: BrokerProcess) -> None:
    """The ERROR for a selector that does not parse names the column and what was expected."""
    connection, collector = connect(broker.address)
    connection.subscribe(unique("queue"), id="q", headers={"selector": "amount >"})
    assert collector.wait_for(lambda: collector.errors), "no ERROR"
    assert "column 9" in collector.errors[0].headers["message"]


def drain(broker: BrokerProcess, destination: str, count: int) -> list[Any]:
    """:returns: the first ``count`` messages of a queue, acknowledged, and no more."""
    connection, collector = connect(broker.address)
    connection.subscribe(destination, id="s", ack="client-individual")
    assert collector.wait_for(lambda: len(collector.messages) >= count), collector.bodies()
    for message in collector.messages:
        connection.ack(message.headers["ack"])
    flush_deliveries(connection, collector)
    assert len(collector.messages) == count, collector.bodies()
    connection.disconnect()
    return collector.messages


def test_priorities_order_a_queue_and_survive_a_sigkill(
    start: BrokerStarter, tmp_path: Path
) -> None:
    """Persistent messages come back after SIGKILL in priority order, with their priority header."""
    data = tmp_path / "data"
    broker = start(data)
    for body, priority in (("low", "1"), ("plain", "4"), ("high", "9"), ("mid", "6")):
        publish(broker.address, "/queue/jobs", [body], priority=priority, **PERSISTENT)
    broker.kill()
    broker = start(data)
    try:
        messages = drain(broker, "/queue/jobs", 4)
        assert [(m.body, m.headers["priority"]) for m in messages] == [
            (b"high", "9"),
            (b"mid", "6"),
            (b"plain", "4"),
            (b"low", "1"),
        ]
    finally:
        broker.stop()


def test_a_composite_destination_reaches_a_queue_and_a_topic(broker: BrokerProcess) -> None:
    """SEND to /queue/a,/topic/b delivers to the queue's consumer and the topic's subscriber."""
    queue, topic = unique("queue"), unique("topic")
    connection, collector = connect(broker.address)
    connection.subscribe(queue, id="q")
    connection.subscribe(topic, id="t")
    flush_deliveries(connection, collector)
    publish(broker.address, f"{queue},{topic}", ["both"])
    assert collector.wait_for(lambda: len(collector.messages) == 2), collector.bodies()
    assert sorted(m.headers["destination"] for m in collector.messages) == sorted([queue, topic])
    connection.disconnect()
