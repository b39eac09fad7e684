"""
The redis engine end to end: a real ``redis-server`` and two or three ``twistd``
nodes sharing it, driven by ``stomp.py`` clients connected to different nodes
(docs/cluster.md).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.clients import connect, flush_deliveries, is_marker, through
from tests.support.process import BrokerProcess, run_python
from tests.support.redis import NODE_TIMEOUT, RedisServer, redis_server, started_nodes, unique  # noqa: F401


@pytest.fixture(scope="module")
def nodes(
    redis_server: RedisServer,  # noqa: F811
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[list[BrokerProcess]]:
    """Three nodes, A, B and C, on one Redis server."""
    with started_nodes(tmp_path_factory, redis_server, "abc") as started:
        yield started


def test_topic_send_reaches_subscribers_on_other_nodes_once_in_order(
    nodes: list[BrokerProcess],
) -> None:
    """A SEND on node A reaches each matching subscription on B and C exactly once, in order."""
    a, b, c = nodes
    base = unique("/topic/cluster.")
    subscriber_b, inbox_b = connect(b.address)
    subscriber_b.subscribe(f"{base}.*", id="wild")
    subscriber_b.subscribe(f"{base}.x", id="exact", receipt="subscribed")
    assert inbox_b.wait_for(lambda: "subscribed" in inbox_b.receipts)
    subscriber_c, inbox_c = connect(c.address)
    subscriber_c.subscribe(f"{base}.#", id="all", receipt="subscribed")
    assert inbox_c.wait_for(lambda: "subscribed" in inbox_c.receipts)
    publisher, _ = connect(a.address)
    bodies = [str(n).encode() for n in range(200)]
    for body in bodies:
        publisher.send(f"{base}.x", body)
    through(inbox_b, (publisher, f"{base}.x"), timeout=10)
    through(inbox_c, (publisher, f"{base}.x"), timeout=10)
    for subscription in ("wild", "exact"):
        got = [m.body for m in inbox_b.messages if m.headers["subscription"] == subscription]
        assert got == bodies
    assert inbox_c.bodies() == bodies
    for connection in (publisher, subscriber_b, subscriber_c):
        connection.disconnect()


def test_a_topic_message_crosses_nodes_with_every_header_and_its_bytes(
    nodes: list[BrokerProcess],
) -> None:
    """
    Headers with ':', a line break and non-ASCII text, a priority, a message
    group and a binary body reach a subscriber on another node as sent (the
    binary topic batch, docs/design/cluster.md "The form of a topic batch").
    """
    a, b, _ = nodes
    topic = unique("/topic/wire.")
    subscriber, inbox = connect(b.address)
    subscriber.subscribe(topic, id="s", receipt="subscribed")
    assert inbox.wait_for(lambda: "subscribed" in inbox.receipts)
    publisher, _ = connect(a.address)
    body = bytes(range(256)) * 3
    sent = {
        "url": "http://example.com:8080/a",
        "größe": "ß ü 日本",
        "note": "two\nlines",
        "priority": "7",
        "JMSXGroupID": "g1",
    }
    publisher.send(topic, body, headers=sent)
    publisher.send(topic, b"plain", headers={"seq": "2"})
    assert inbox.wait_for(lambda: len(inbox.messages) == 2, timeout=10)
    first, second = inbox.messages
    assert first.body == body and second.body == b"plain"
    assert {name: first.headers.get(name) for name in sent} == sent
    assert second.headers["seq"] == "2"
    for connection in (publisher, subscriber):
        connection.disconnect()


def test_competing_consumers_across_nodes_get_each_message_once(
    nodes: list[BrokerProcess],
) -> None:
    """Client-individual consumers on three nodes share a queue: no loss, no duplicate."""
    queue = unique("/queue/jobs.")
    consumers = []
    for process in nodes:
        connection, inbox = connect(process.address)
        connection.subscribe(queue, id="s", ack="client-individual", headers={"prefetch-count": 5})
        consumers.append((connection, inbox))
    received: list[bytes] = []
    lock = threading.Lock()

    class Acker:
        def __init__(self, connection: object) -> None:
            self.connection = connection

        def on_message(self, frame: object) -> None:
            if is_marker(frame):
                return
            with lock:
                received.append(frame.body)  # type: ignore[attr-defined]
            self.connection.ack(frame.headers["ack"])  # type: ignore[attr-defined]

    for connection, _ in consumers:
        connection.set_listener("acker", Acker(connection))
    publisher, publisher_inbox = connect(nodes[0].address)
    count = 600
    for n in range(count):
        publisher.send(queue, str(n).encode())
    publisher.send(queue, b"last", receipt="sent")
    assert publisher_inbox.wait_for(lambda: "sent" in publisher_inbox.receipts)
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and len(received) < count + 1:
        time.sleep(0.05)
    for connection, inbox in consumers:
        flush_deliveries(connection, inbox)
    assert sorted(received) == sorted([str(n).encode() for n in range(count)] + [b"last"])
    spread = [len(inbox.messages) for _, inbox in consumers]
    assert sum(1 for got in spread if got) >= 2, spread
    for connection, _ in consumers:
        connection.disconnect()
    publisher.disconnect()


def test_reply_reaches_a_temporary_queue_on_another_node(nodes: list[BrokerProcess]) -> None:
    """A reply sent on node B reaches the requester's temporary queue on node A."""
    requester, requests = connect(nodes[0].address)
    requester.subscribe("/temp-queue/answers", id="answers")
    server, inbox = connect(nodes[1].address)
    service = unique("/queue/service.")
    server.subscribe(service, id="svc")
    requester.send(service, b"question", headers={"reply-to": "/temp-queue/answers"})
    assert inbox.wait_for(lambda: bool(inbox.messages), timeout=5)
    reply_to = inbox.messages[0].headers["reply-to"]
    assert reply_to.startswith("/reply-queue/")
    server.send(reply_to, b"answer")
    assert requests.wait_for(lambda: requests.bodies() == [b"answer"], timeout=5)
    requester.disconnect()
    server.disconnect()


def test_the_management_api_lists_every_node(
    redis_server: RedisServer,  # noqa: F811
    tmp_path: Path,
) -> None:
    """
    GET /api/nodes on a node of a Redis cluster lists every live node, itself first
    (issue 18), as `stompbroker nodes --json` prints it.
    """
    # A prefix of its own: the module's other nodes share this Redis server.
    url = f"{redis_server.url}?prefix=nodes-listed"
    started = [
        BrokerProcess(
            tmp_path / name, "--engine", url, "--node-timeout", NODE_TIMEOUT, reactor="uvloop"
        )
        for name in ("a", "b")
    ]
    try:
        url = f"http://127.0.0.1:{started[0].http_port}"
        result = run_python("-m", "stompbroker.app.cli", "nodes", "--json", "--url", url)
        assert result.returncode == 0, result.stderr
        listed = json.loads(result.stdout)
        assert len(listed) == 2
        assert [entry["here"] for entry in listed] == [True, False]
        assert {entry["engine"] for entry in listed} == {"redis"}
    finally:
        for process in started:
            process.stop()
