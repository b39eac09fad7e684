"""
Scheduled delivery and retained messages on the redis engine, across nodes: a
real ``redis-server`` and ``twistd`` nodes, the producer on one node and the
consumer on another, with the headers of docs/destinations.md
(docs/design/cluster.md, "Scheduled delivery" and "Retained messages").
"""

from __future__ import annotations

import time
from pathlib import Path

import redis

from tests.support.clients import connect, through
from tests.support.process import BrokerProcess
from tests.support.redis import RedisServer, node, redis_server, two_nodes, unique  # noqa: F401

#: Seconds a test waits for what its nodes owe it.
WAIT = 10.0


def jobs_left(server: RedisServer) -> int:
    """:returns: how many scheduled jobs Redis holds (of the default prefix)."""
    client = redis.Redis(port=server.port)
    try:
        return int(client.zcard("stompbroker:{sched}"))
    finally:
        client.close()


def wait_until_no_jobs(server: RedisServer) -> None:
    """Wait until every scheduled job has had its last delivery (and was removed)."""
    deadline = time.monotonic() + WAIT
    while jobs_left(server):
        assert time.monotonic() < deadline, "scheduled jobs never finished"
        time.sleep(0.05)


def test_scheduled_message_sent_on_one_node_is_delivered_on_the_other_once_when_due(
    nodes: list[BrokerProcess],
    redis_server: RedisServer,  # noqa: F811
) -> None:
    """
    AMQ_SCHEDULED_DELAY on node A: the consumer on node B gets it once, not
    before its due time, with scheduledJobId and without the scheduling header.
    """
    a, b = nodes
    queue = unique("/queue/later.")
    consumer, inbox = connect(b.address)
    consumer.subscribe(queue, id="q", receipt="subscribed")
    assert inbox.wait_for(lambda: "subscribed" in inbox.receipts)
    producer, sent = connect(a.address)
    started = time.time()
    producer.send(
        queue,
        b"later",
        headers={"AMQ_SCHEDULED_DELAY": "1500", "persistent": "true"},
        receipt="scheduled",
    )
    assert sent.wait_for(lambda: "scheduled" in sent.receipts)
    assert inbox.wait_for(lambda: inbox.messages, WAIT)
    arrived = time.time()
    wait_until_no_jobs(redis_server)
    through(inbox, (a.address, queue))
    assert inbox.bodies() == [b"later"]
    message = inbox.messages[0]
    assert arrived - started >= 1.45
    assert "AMQ_SCHEDULED_DELAY" not in message.headers
    assert message.headers["scheduledJobId"] == message.headers["message-id"]
    producer.disconnect()
    consumer.disconnect()


def test_a_repeat_and_an_x_delay_to_a_topic_fire_on_another_node(
    nodes: list[BrokerProcess],
    redis_server: RedisServer,  # noqa: F811
) -> None:
    """
    AMQ_SCHEDULED_PERIOD/REPEAT: REPEAT more deliveries after the first, each with
    its own message-id; RabbitMQ's x-delay to a topic reaches its subscriber on
    the other node.
    """
    a, b = nodes
    queue, topic = unique("/queue/repeat."), unique("/topic/delayed.")
    consumer, inbox = connect(b.address)
    consumer.subscribe(queue, id="q")
    consumer.subscribe(topic, id="t", receipt="subscribed")
    assert inbox.wait_for(lambda: "subscribed" in inbox.receipts)
    producer, sent = connect(a.address)
    producer.send(
        queue,
        b"tick",
        headers={
            "AMQ_SCHEDULED_DELAY": "100",
            "AMQ_SCHEDULED_PERIOD": "200",
            "AMQ_SCHEDULED_REPEAT": "2",
        },
    )
    producer.send(topic, b"delayed", headers={"x-delay": "300"}, receipt="scheduled")
    assert sent.wait_for(lambda: "scheduled" in sent.receipts)
    assert inbox.wait_for(lambda: len(inbox.messages) >= 4, WAIT)
    wait_until_no_jobs(redis_server)
    through(inbox, (a.address, queue), (a.address, topic))
    ticks = [m for m in inbox.messages if m.headers["destination"] == queue]
    assert [m.body for m in ticks] == [b"tick"] * 3
    assert len({m.headers["message-id"] for m in ticks}) == 3
    assert {m.headers["scheduledJobId"] for m in ticks} == {ticks[0].headers["message-id"]}
    assert [m.body for m in inbox.messages if m.headers["destination"] == topic] == [b"delayed"]
    producer.disconnect()
    consumer.disconnect()


def test_a_scheduled_message_outlives_the_node_that_took_it(
    nodes: list[BrokerProcess],
    redis_server: RedisServer,  # noqa: F811
    tmp_path: Path,
) -> None:
    """
    The node that took a persistent scheduled SEND is SIGKILLed before its due
    time: the other node delivers it once anyway, at its due time.
    """
    a, _ = nodes
    queue = unique("/queue/orphan.")
    consumer, inbox = connect(a.address)
    consumer.subscribe(queue, id="q", receipt="subscribed")
    assert inbox.wait_for(lambda: "subscribed" in inbox.receipts)
    doomed = node(tmp_path / "doomed", redis_server)
    producer, sent = connect(doomed.address)
    started = time.time()
    producer.send(
        queue,
        b"orphan",
        headers={"AMQ_SCHEDULED_DELAY": "2000", "persistent": "true"},
        receipt="scheduled",
    )
    assert sent.wait_for(lambda: "scheduled" in sent.receipts)
    doomed.kill()
    assert inbox.wait_for(lambda: inbox.messages, WAIT)
    assert time.time() - started >= 1.95
    wait_until_no_jobs(redis_server)
    through(inbox, (a.address, queue))
    assert inbox.bodies() == [b"orphan"]
    consumer.disconnect()


def test_a_retained_message_set_on_one_node_reaches_new_subscribers_on_the_other(
    nodes: list[BrokerProcess],
) -> None:
    """
    retain:set on node A: a new subscription on node B (a wildcard one too) gets
    the retained copy first, with retained:true; after retain:remove, none.
    """
    a, b = nodes
    base = unique("/topic/state.")
    # A subscriber on B already: its copy of each SEND is the barrier (a node
    # applies a retained value before it fans out what follows it).
    watcher, seen = connect(b.address)
    watcher.subscribe(f"{base}.>", id="w", receipt="watching")
    assert seen.wait_for(lambda: "watching" in seen.receipts)
    publisher, sent = connect(a.address)
    publisher.send(f"{base}.x", b"old", headers={"retain": "set"})
    publisher.send(f"{base}.x", b"value", headers={"retain": "set"}, receipt="kept")
    publisher.send(f"{base}.y", b"other", headers={"retain": "set", "persistent": "true"})
    assert sent.wait_for(lambda: "kept" in sent.receipts)
    assert seen.wait_for(lambda: len(seen.messages) == 3)

    late, inbox = connect(b.address)
    late.subscribe(f"{base}.x", id="exact")
    late.subscribe(f"{base}.*", id="wild", receipt="subscribed")
    assert inbox.wait_for(lambda: "subscribed" in inbox.receipts)
    through(inbox, (b.address, f"{base}.x"))
    exact = [m for m in inbox.messages if m.headers["subscription"] == "exact"]
    wild = [m for m in inbox.messages if m.headers["subscription"] == "wild"]
    assert [m.body for m in exact] == [b"value"]
    assert [m.body for m in wild] == [b"value", b"other"]
    assert all(m.headers["retained"] == "true" for m in exact + wild)
    assert all("retain" not in m.headers for m in exact + wild)

    publisher.send(f"{base}.x", b"", headers={"retain": "remove"}, receipt="removed")
    assert sent.wait_for(lambda: "removed" in sent.receipts)
    assert seen.wait_for(lambda: len(seen.messages) == 4)
    again, after = connect(b.address)
    again.subscribe(f"{base}.*", id="again", receipt="subscribed")
    assert after.wait_for(lambda: "subscribed" in after.receipts)
    through(after, (b.address, f"{base}.z"))
    assert [m.body for m in after.messages] == [b"other"]
    for connection in (watcher, publisher, late, again):
        connection.disconnect()


def test_a_node_started_later_has_the_retained_messages(
    nodes: list[BrokerProcess],
    redis_server: RedisServer,  # noqa: F811
    tmp_path: Path,
) -> None:
    """Retained values live in Redis: a node that starts after they were set serves them."""
    a, _ = nodes
    topic = unique("/topic/kept.")
    publisher, sent = connect(a.address)
    publisher.send(topic, b"first", headers={"retain": "set"})
    publisher.send(topic, b"kept", headers={"retain": "set"}, receipt="kept")
    assert sent.wait_for(lambda: "kept" in sent.receipts)
    publisher.disconnect()
    with node(tmp_path / "late", redis_server) as late:
        subscriber, inbox = connect(late.address)
        subscriber.subscribe(topic, id="s", receipt="subscribed")
        assert inbox.wait_for(lambda: "subscribed" in inbox.receipts)
        through(inbox, (late.address, topic))
        assert [(m.body, m.headers["retained"]) for m in inbox.messages] == [(b"kept", "true")]
        subscriber.disconnect()


def browse_on(process: BrokerProcess, queue: str) -> list[bytes]:
    """:returns: the bodies a browser on ``process`` sees in ``queue``, up to ``browser:end``."""
    connection, inbox = connect(process.address)
    connection.subscribe(queue, id="browse", headers={"browser": "true"})
    assert inbox.wait_for(
        lambda: any(m.headers.get("browser") == "end" for m in inbox.messages), WAIT
    )
    connection.disconnect()
    return [m.body for m in inbox.messages if m.headers.get("browser") != "end"]


def test_a_browser_on_one_node_sees_what_waits_cluster_wide(
    nodes: list[BrokerProcess],
) -> None:
    """
    browser:true on node B sees, in order, every message sent on node A that
    waits, and not those delivered to a consumer on A and unacknowledged.
    """
    a, b = nodes
    queue = unique("/queue/browsed.")
    bodies = [f"m{n}".encode() for n in range(10)]
    consumer, inbox = connect(a.address)
    consumer.subscribe(
        queue,
        id="c",
        ack="client-individual",
        headers={"activemq.prefetchSize": "2"},
        receipt="subscribed",
    )
    assert inbox.wait_for(lambda: "subscribed" in inbox.receipts)
    publisher, sent = connect(a.address)
    for index, body in enumerate(bodies):
        publisher.send(queue, body, headers={"persistent": "true"}, receipt=f"s{index}")
    assert sent.wait_for(lambda: len(sent.receipts) == len(bodies))
    assert inbox.wait_for(lambda: len(inbox.messages) == 2)
    assert browse_on(b, queue) == bodies[2:]
    # Nothing was taken: the consumer, acknowledging, gets the rest in order.
    for message in inbox.messages[:2]:
        consumer.ack(message.headers["ack"])
    assert inbox.wait_for(lambda: len(inbox.messages) == 4)
    assert browse_on(b, queue) == bodies[4:]
    publisher.disconnect()
    consumer.disconnect()
