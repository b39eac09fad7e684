"""
The management API on the redis engine acts on a grouped ``/queue/``'s
returned stream: a real ``redis-server`` and two ``twistd`` nodes; a consumer
on node B takes grouped messages, acknowledges none and leaves, so they wait
in the returned stream ``PREFIX:{q:/queue/X}:returned`` with nobody to read them; node
A's browse shows them, its move and purge take them (docs/cluster.md,
"Management across nodes").
"""

from __future__ import annotations

import time
import urllib.request
from collections.abc import Iterator

import pytest
import redis

from tests.support.clients import connect
from tests.support.policy_calls import WAIT, call, eventually
from tests.support.process import BrokerProcess
from tests.support.redis import RedisServer, api_nodes, redis_server, unique  # noqa: F401

PREFIX = "stompbroker"
BODIES = ["g1-a", "g2-a", "g1-b", "g2-b"]


@pytest.fixture
def store(redis_server: RedisServer) -> Iterator[redis.Redis]:  # noqa: F811
    client = redis.Redis(port=redis_server.port)
    yield client
    client.close()


def segment(destination: str) -> str:
    return urllib.request.quote(destination, safe="")


def browse(process: BrokerProcess, queue: str) -> list[str]:
    status, answer = call(process, "GET", f"destinations/{segment(queue)}/messages?count=100")
    assert status == 200, answer
    return [message["body"] for message in answer]


def given_back(nodes: list[BrokerProcess], store: redis.Redis, queue: str) -> None:
    """
    Send :data:`BODIES` (groups g1 and g2) on node A; a consumer on node B
    takes them all, acknowledges none and disconnects: they wait in the
    queue's returned stream, and nothing else holds them.
    """
    a, b = nodes
    consumer, inbox = connect(b.address)
    consumer.subscribe(queue, id="1", ack="client-individual", receipt="r")
    assert inbox.wait_for(lambda: "r" in inbox.receipts, WAIT)
    publisher, sent = connect(a.address)
    for index, body in enumerate(BODIES):
        group = body.partition("-")[0]
        headers = {"persistent": "true", "JMSXGroupID": group}
        publisher.send(queue, body.encode(), headers=headers, receipt=f"s{index}")
    assert sent.wait_for(lambda: len(sent.receipts) == len(BODIES), WAIT)
    publisher.disconnect()
    assert inbox.wait_for(lambda: len(inbox.messages) == len(BODIES), WAIT)
    consumer.disconnect()
    returned = f"{PREFIX}:{{q:{queue}}}:returned"
    eventually(lambda: store.xlen(returned) == len(BODIES))


def depth(process: BrokerProcess, queue: str) -> int:
    """:returns: the queue's depth in ``process``'s ``/api/destinations``."""
    status, answer = call(process, "GET", "destinations")
    assert status == 200, answer
    return sum(int(entry["depth"]) for entry in answer if entry["destination"] == queue)


def test_what_a_consumer_that_left_gave_back_is_browsed_counted_and_purged(
    api_nodes: list[BrokerProcess],  # noqa: F811
    store: redis.Redis,
) -> None:
    """
    Browse shows the given-back messages in order and the depth counts them;
    a purge removes them, and a consumer that comes later gets only what is
    sent after.
    """
    a, b = api_nodes
    queue = unique("/queue/returned.")
    given_back(api_nodes, store, queue)
    assert browse(a, queue) == BODIES
    assert browse(b, queue) == BODIES
    eventually(lambda: depth(a, queue) == len(BODIES))
    status, answer = call(a, "DELETE", f"destinations/{segment(queue)}/messages")
    assert status == 200, answer
    assert (answer["purged"], answer["complete"]) == (len(BODIES), True), answer
    assert browse(a, queue) == []
    assert store.xlen(f"{PREFIX}:{{q:{queue}}}:returned") == 0
    eventually(lambda: depth(a, queue) == 0)
    later, inbox = connect(b.address)
    later.subscribe(queue, id="1", ack="auto", receipt="r")
    assert inbox.wait_for(lambda: "r" in inbox.receipts, WAIT)
    time.sleep(0.5)
    assert inbox.messages == []
    publisher, _ = connect(a.address)
    publisher.send(queue, b"after", headers={"JMSXGroupID": "g1"})
    publisher.disconnect()
    assert inbox.wait_for(lambda: len(inbox.messages) == 1, WAIT)
    assert [message.body for message in inbox.messages] == [b"after"]
    later.disconnect()


def test_what_a_consumer_that_left_gave_back_is_moved_in_order(
    api_nodes: list[BrokerProcess],  # noqa: F811
    store: redis.Redis,
) -> None:
    a, b = api_nodes
    queue, target = unique("/queue/returned."), unique("/queue/target.")
    given_back(api_nodes, store, queue)
    status, answer = call(a, "POST", f"destinations/{segment(queue)}/move", {"to": target})
    assert status == 200, answer
    assert (answer["moved"], answer["complete"]) == (len(BODIES), True), answer
    assert browse(a, queue) == []
    assert browse(b, target) == BODIES
