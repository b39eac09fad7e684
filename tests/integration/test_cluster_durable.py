"""
Durable topic subscriptions on the redis engine: a real ``redis-server`` and
two ``twistd`` nodes; the backlog lives in Redis, so the subscriber may come
back on either node (docs/cluster.md).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.clients import connect, through
from tests.support.process import BrokerProcess, run_python
from tests.support.redis import NODE_TIMEOUT, RedisServer, redis_server, unique  # noqa: F401

#: Seconds a durable subscription's notice may take to reach every node (one
#: pub/sub hop; docs/cluster.md says a subscription is live cluster-wide then).
NOTICE = 10.0


@pytest.fixture(scope="module")
def nodes(
    redis_server: RedisServer,  # noqa: F811
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[list[BrokerProcess]]:
    """Two nodes, A and B, on one Redis server, each with its web port (the API)."""
    started = [
        BrokerProcess(
            tmp_path_factory.mktemp(name),
            "--engine",
            redis_server.url,
            "--node-timeout",
            NODE_TIMEOUT,
            reactor="uvloop",
        )
        for name in "ab"
    ]
    yield started
    for process in started:
        process.stop()


def durable_subscriber(process: BrokerProcess, client_id: str, topic: str, name: str) -> Any:
    """:returns: a connection of ``client_id`` subscribed to ``name`` on ``topic``, its inbox."""
    connection, inbox = connect(process.address, headers={"client-id": client_id})
    connection.subscribe(
        topic,
        id="d",
        ack="client-individual",
        headers={"activemq.subscriptionName": name},
        receipt="subscribed",
    )
    assert inbox.wait_for(lambda: "subscribed" in inbox.receipts)
    return connection, inbox


def heard(everyone: list[BrokerProcess], client_id: str, name: str, present: bool = True) -> None:
    """Wait until every node's API lists the durable subscription (or none lists it)."""
    key = "durable:" + json.dumps([client_id, name])
    deadline = time.monotonic() + NOTICE
    for process in everyone:
        while (key in {entry["destination"] for entry in api(process, "queues", "--json")}) != (
            present
        ):
            assert time.monotonic() < deadline, f"{process.address} never heard of {key}"
            time.sleep(0.1)


def made_and_left(everyone: list[BrokerProcess], client_id: str, topic: str, name: str) -> None:
    """Make a durable subscription on the first node, leave it, and let every node hear of it."""
    connection, _ = durable_subscriber(everyone[0], client_id, topic, name)
    connection.disconnect()
    heard(everyone, client_id, name)


def send_all(process: BrokerProcess, topic: str, bodies: list[bytes], **headers: str) -> None:
    """Send ``bodies`` to ``topic`` on ``process``, and wait for the last one's RECEIPT."""
    connection, inbox = connect(process.address)
    for body in bodies[:-1]:
        connection.send(topic, body, headers=dict(headers))
    connection.send(topic, bodies[-1], headers=dict(headers), receipt="sent")
    assert inbox.wait_for(lambda: "sent" in inbox.receipts)
    connection.disconnect()


def api(process: BrokerProcess, *args: str) -> Any:
    """:returns: what a ``stompbroker`` management subcommand prints, as JSON if it can."""
    url = f"http://127.0.0.1:{process.http_port}"
    result = run_python("-m", "stompbroker.app.cli", *args, "--url", url)
    assert result.returncode == 0, result.stderr
    try:
        return json.loads(result.stdout)
    except ValueError:
        return result.stdout


def test_backlog_made_on_both_nodes_reaches_the_subscriber_back_on_the_other(
    nodes: list[BrokerProcess],
) -> None:
    """
    What is published on either node while a durable subscriber is away reaches
    it, once and in each publisher's order, when it comes back on the other node.
    """
    a, b = nodes
    client_id, topic = unique("client-"), unique("/topic/durable.")
    made_and_left(nodes, client_id, f"{topic}.*", "resume")
    from_a = [f"a{n}".encode() for n in range(50)]
    from_b = [f"b{n}".encode() for n in range(50)]
    send_all(a, f"{topic}.x", from_a, persistent="true")
    send_all(b, f"{topic}.y", from_b)
    send_all(b, unique("/topic/elsewhere."), [b"not for it"])
    connection, inbox = durable_subscriber(b, client_id, f"{topic}.*", "resume")
    assert inbox.wait_for(lambda: len(inbox.messages) >= 100, timeout=10)
    for message in inbox.messages:
        connection.ack(message.headers["ack"])
    through(inbox, (a.address, f"{topic}.x"), (b.address, f"{topic}.y"), timeout=10)
    got = inbox.bodies()
    assert [body for body in got if body.startswith(b"a")] == from_a
    assert [body for body in got if body.startswith(b"b")] == from_b
    assert len(got) == 100
    connection.disconnect()


def test_what_was_not_acknowledged_comes_back_on_the_next_node(
    nodes: list[BrokerProcess],
) -> None:
    """Messages a durable subscriber got on node A and did not ACK reach it again on node B."""
    a, b = nodes
    client_id, topic = unique("client-"), unique("/topic/unacked.")
    connection, inbox = durable_subscriber(a, client_id, topic, "held")
    heard(nodes, client_id, "held")
    send_all(b, topic, [b"one", b"two"])
    assert inbox.wait_for(lambda: len(inbox.messages) == 2, timeout=10)
    connection.ack(inbox.messages[0].headers["ack"], receipt="acked")
    assert inbox.wait_for(lambda: "acked" in inbox.receipts)
    connection.disconnect()
    connection, inbox = durable_subscriber(b, client_id, topic, "held")
    through(inbox, (b.address, topic), timeout=10)
    assert inbox.bodies() == [b"two"]
    assert inbox.messages[0].headers.get("redelivered") == "true"
    connection.disconnect()


def test_unsubscribe_with_the_durable_header_deletes_it_for_every_node(
    nodes: list[BrokerProcess],
) -> None:
    """An UNSUBSCRIBE naming the durable subscription on node B deletes the one made on A."""
    a, b = nodes
    client_id, topic = unique("client-"), unique("/topic/gone.")
    made_and_left(nodes, client_id, topic, "gone")
    send_all(a, topic, [b"backlog"])
    connection, inbox = connect(b.address, headers={"client-id": client_id})
    connection.unsubscribe("d", headers={"activemq.subscriptionName": "gone"}, receipt="deleted")
    assert inbox.wait_for(lambda: "deleted" in inbox.receipts)
    assert not inbox.errors
    connection.disconnect()
    heard(nodes, client_id, "gone", present=False)
    send_all(a, topic, [b"after"])
    connection, inbox = durable_subscriber(a, client_id, topic, "gone")
    heard(nodes, client_id, "gone")
    send_all(b, topic, [b"fresh"])
    through(inbox, (b.address, topic), timeout=10)
    assert inbox.bodies() == [b"fresh"]
    connection.disconnect()


def test_the_management_api_of_either_node_lists_and_deletes_it(
    nodes: list[BrokerProcess],
) -> None:
    """
    A durable subscription made on node A is listed by node B's management API,
    and deleting it there deletes its backlog for every node.
    """
    a, b = nodes
    client_id, topic = unique("client-"), unique("/topic/managed.")
    made_and_left(nodes, client_id, topic, "managed")
    send_all(a, topic, [b"old"])
    key = "durable:" + json.dumps([client_id, "managed"])
    listed = {entry["destination"]: entry for entry in api(b, "queues", "--json")}
    assert listed[key]["kind"] == "durable"
    assert listed[key]["pattern"] == topic
    api(b, "delete", key)
    heard(nodes, client_id, "managed", present=False)
    connection, inbox = durable_subscriber(a, client_id, topic, "managed")
    heard(nodes, client_id, "managed")
    send_all(b, topic, [b"new"])
    through(inbox, (b.address, topic), timeout=10)
    assert inbox.bodies() == [b"new"]
    connection.disconnect()
