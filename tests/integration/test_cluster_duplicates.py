"""
Duplicate detection shared by every node of a cluster (docs/destinations.md,
"Exactly once into a queue"; docs/design/cluster.md, "Duplicate detection"): a
real ``redis-server`` and two ``twistd`` nodes, driven by ``stomp.py``.  A SEND
retried on the other node with the same ``duplicate-id`` is routed once, to a
queue and to a topic's subscribers on both nodes, and counted at COMMIT in a
transaction; an id whose window ran out goes through again; a node SIGKILLed
right after the RECEIPT leaves the id with the cluster; a Redis that forgot
the script is sent it again.
"""

from __future__ import annotations

import time
import urllib.request

import pytest
import redis

from tests.support.clients import connect, drain, flush_deliveries
from tests.support.policy_calls import WAIT, call, eventually, names
from tests.support.process import BrokerProcess
from tests.support.redis import RedisServer, api_nodes, node, redis_server  # noqa: F401


def send(
    broker: BrokerProcess, destination: str, body: str, duplicate_id: str, **headers: str
) -> None:
    """Send one message with ``duplicate_id`` and wait for its RECEIPT."""
    connection, events = connect(broker.address)
    connection.send(
        destination, body, headers={"duplicate-id": duplicate_id, **headers}, receipt="sent"
    )
    assert events.wait_for(lambda: "sent" in events.receipts, WAIT), events.errors
    connection.disconnect()


def test_an_id_sent_to_one_node_then_the_other_is_queued_once(
    api_nodes: list[BrokerProcess],  # noqa: F811
) -> None:
    a, b = api_nodes
    send(a, "/queue/orders", "attempt 1", "order-1", persistent="true")
    send(b, "/queue/orders", "attempt 2", "order-1", persistent="true")
    send(b, "/queue/orders", "attempt 1", "order-2")
    send(a, "/queue/orders", "attempt 2", "order-2")
    messages = drain(a, "/queue/orders", 2)
    assert [(m.headers["duplicate-id"], m.body) for m in messages] == [
        ("order-1", b"attempt 1"),
        ("order-2", b"attempt 1"),
    ]


def test_duplicates_count_per_destination_summed_over_the_nodes(
    api_nodes: list[BrokerProcess],  # noqa: F811
) -> None:
    """A repeat on each node: /api/overview (as /stats) and /metrics show both, on either node."""
    a, b = api_nodes
    send(a, "/queue/counted", "first", "c-1")
    send(b, "/queue/counted", "again", "c-1")
    send(b, "/queue/counted", "second", "c-2")
    send(a, "/queue/counted", "again", "c-2")

    def duplicates(process: BrokerProcess) -> object:
        status, overview = call(process, "GET", "overview")
        assert status == 200, overview
        return overview["destinations"].get("/queue/counted", {}).get("messages_duplicate")

    for process in (a, b):
        eventually(lambda process=process: duplicates(process) == 2)
    metrics = urllib.request.urlopen(f"http://127.0.0.1:{a.http_port}/metrics", timeout=WAIT).read()
    assert (
        b'stompbroker_destination_messages_duplicate_total{destination="/queue/counted"} 2.0'
        in metrics
    )
    drain(a, "/queue/counted", 2)


def test_in_a_transaction_the_id_counts_at_commit(
    api_nodes: list[BrokerProcess],  # noqa: F811
) -> None:
    """An aborted SEND leaves no id behind; a committed one's id stops a retry on the other node."""
    a, b = api_nodes
    connection, events = connect(a.address)
    for ending, body in (("abort", "aborted"), ("commit", "committed")):
        connection.begin(transaction=ending)
        connection.send("/queue/held", body, headers={"duplicate-id": "h-1"}, transaction=ending)
        getattr(connection, ending)(transaction=ending, receipt=ending)
        assert events.wait_for(lambda ending=ending: ending in events.receipts, WAIT)
    connection.disconnect()
    send(b, "/queue/held", "retried", "h-1")
    assert [m.body for m in drain(a, "/queue/held", 1)] == [b"committed"]


def test_a_topic_message_sent_to_both_nodes_reaches_each_subscriber_once(
    api_nodes: list[BrokerProcess],  # noqa: F811
) -> None:
    a, b = api_nodes
    readers = [connect(a.address), connect(b.address)]
    for connection, _ in readers:
        connection.subscribe("/topic/prices", id="1", receipt="subscribed")
    for _, inbox in readers:
        assert inbox.wait_for(lambda inbox=inbox: "subscribed" in inbox.receipts, WAIT)
    send(a, "/topic/prices", "first", "price-1")
    send(b, "/topic/prices", "again", "price-1")
    send(b, "/topic/prices", "second", "price-2")
    for connection, inbox in readers:
        assert inbox.wait_for(lambda inbox=inbox: len(inbox.messages) >= 2, WAIT)
        flush_deliveries(connection, inbox)
        assert inbox.bodies() == [b"first", b"second"]
        connection.disconnect()


def test_an_id_past_its_window_is_routed_again(
    api_nodes: list[BrokerProcess],  # noqa: F811
) -> None:
    a, b = api_nodes
    status, answer = call(
        a,
        "PUT",
        "policies/brief",
        {"pattern": "brief.>", "apply-to": "queues", "definition": {"duplicate-window": 500}},
    )
    assert status == 200, answer
    eventually(lambda: "brief" in names(b))
    send(a, "/queue/brief.jobs", "first", "job-1")
    send(b, "/queue/brief.jobs", "within", "job-1")
    time.sleep(0.6)
    send(b, "/queue/brief.jobs", "after", "job-1")
    assert [m.body for m in drain(a, "/queue/brief.jobs", 2)] == [b"first", b"after"]


def test_redis_that_forgot_the_script_is_sent_it_again(
    api_nodes: list[BrokerProcess],  # noqa: F811
    redis_server: RedisServer,  # noqa: F811
) -> None:
    """As after a restart of Redis, or a replica promoted: the id still counts once."""
    a, b = api_nodes
    send(a, "/queue/flushed", "first", "f-1")
    client = redis.Redis(port=redis_server.port)
    client.script_flush()
    client.close()
    send(b, "/queue/flushed", "again", "f-1")
    send(b, "/queue/flushed", "second", "f-2")
    assert [m.body for m in drain(a, "/queue/flushed", 2)] == [b"first", b"second"]


def test_a_node_killed_after_the_receipt_leaves_the_id_with_the_cluster(
    api_nodes: list[BrokerProcess],  # noqa: F811
    redis_server: RedisServer,  # noqa: F811
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    a, _ = api_nodes
    c = node(tmp_path_factory.mktemp("c"), redis_server)
    try:
        send(c, "/queue/payments", "attempt 1", "payment-1", persistent="true")
        c.kill()
        send(a, "/queue/payments", "attempt 2", "payment-1", persistent="true")
    finally:
        c.stop()
    assert [m.body for m in drain(a, "/queue/payments", 1)] == [b"attempt 1"]
