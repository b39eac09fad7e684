"""
The management API on the redis engine acts on a ``/queue/`` across nodes: a
real ``redis-server`` and two ``twistd`` nodes; messages sent on node A, some
read ahead by node B for its consumers; browse, purge, move, copy and
dead-letter retry through node A's API act on every waiting message, and a
node that does not answer (SIGSTOPped) makes the answer say so
(docs/cluster.md, "Management across nodes"; docs/management.md).
"""

from __future__ import annotations

import json
import os
import signal
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.clients import connect
from tests.support.process import BrokerProcess
from tests.support.redis import RedisServer, redis_server, unique  # noqa: F401

#: Seconds a test waits for what its nodes owe it.
WAIT = 10.0
#: The answer of a node that waits on a stopped one comes within the control
#: channel's answer timeout (2 s) and this margin.
BOUND = 6.0


@pytest.fixture(scope="module")
def nodes(
    redis_server: RedisServer,  # noqa: F811
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[list[BrokerProcess]]:
    """
    Nodes A and B with web ports, and a node timeout long enough that a node
    stopped for a few seconds is late, not dead.
    """
    started = [
        BrokerProcess(
            tmp_path_factory.mktemp(name),
            "--engine",
            redis_server.url,
            "--node-timeout",
            "20",
            reactor="uvloop",
        )
        for name in "ab"
    ]
    try:
        yield started
    finally:
        for process in started:
            process.stop()


def call(process: BrokerProcess, method: str, path: str, body: Any = None) -> tuple[int, Any, Any]:
    """:returns: the status, JSON answer and headers of an API call on ``process``."""
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(
        f"http://127.0.0.1:{process.http_port}/api/{path}",
        data=data,
        method=method,
        headers={"Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=WAIT) as response:
            return response.status, json.loads(response.read()), response.headers
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read()), error.headers


def segment(destination: str) -> str:
    return urllib.request.quote(destination, safe="")


def browse(process: BrokerProcess, queue: str) -> list[str]:
    status, answer, _ = call(process, "GET", f"destinations/{segment(queue)}/messages?count=100")
    assert status == 200, answer
    return [message["body"] for message in answer]


def until_waiting(process: BrokerProcess, queue: str, expected: list[str]) -> None:
    """Wait (bounded) until a browse through ``process`` shows ``expected``."""
    deadline = time.monotonic() + WAIT
    while (seen := browse(process, queue)) != expected:
        assert time.monotonic() < deadline, f"waiting: {seen}, expected {expected}"
        time.sleep(0.05)


def node_name(process: BrokerProcess) -> str:
    _, nodes, _ = call(process, "GET", "nodes")
    return str(next(node["name"] for node in nodes if node["here"]))


def read_ahead_on_b(nodes: list[BrokerProcess], queue: str, headers: Any = None) -> Any:
    """
    Send m0..m9 on node A; on node B, two consumers with a window of 3 each take
    six, and one of them leaves: its three wait read ahead on B (the other's
    window is full), four wait unread in Redis, three are delivered.

    :returns: the staying consumer's connection, inbox, and the waiting bodies.
    """
    a, b = nodes
    leaving, _ = connect(b.address)
    staying, inbox = connect(b.address)
    for connection, name in ((leaving, "leaving"), (staying, "staying")):
        connection.subscribe(
            queue,
            id=name,
            ack="client-individual",
            headers={"activemq.prefetchSize": "3"},
            receipt=name,
        )
    publisher, sent = connect(a.address)
    for index in range(10):
        publisher.send(
            queue,
            f"m{index}".encode(),
            headers={"persistent": "true", **(headers or {})},
            receipt=f"s{index}",
        )
    assert sent.wait_for(lambda: len(sent.receipts) == 10, WAIT)
    publisher.disconnect()
    assert inbox.wait_for(lambda: len(inbox.messages) == 3, WAIT)
    delivered = {message.body.decode() for message in inbox.messages}
    leaving.disconnect()
    waiting = [f"m{index}" for index in range(10) if f"m{index}" not in delivered]
    until_waiting(a, queue, waiting)
    return staying, inbox, waiting


def test_browse_and_purge_through_one_node_reach_another_nodes_read_ahead(
    nodes: list[BrokerProcess],
) -> None:
    """
    Node A's browse shows the seven waiting (B's read-ahead among them, in
    stream order), its purge removes all seven and says it is complete; the
    three delivered to B's consumer stay its own and come back when it leaves.
    """
    a, b = nodes
    queue = unique("/queue/purged.")
    staying, inbox, waiting = read_ahead_on_b(nodes, queue)
    assert len(waiting) == 7
    status, answer, headers = call(a, "GET", f"destinations/{segment(queue)}/messages")
    assert status == 200 and headers["stompbroker-node"] == node_name(a)
    status, answer, _ = call(a, "DELETE", f"destinations/{segment(queue)}/messages")
    assert status == 200, answer
    assert answer == {
        "destination": queue,
        "vhost": "/",
        "purged": 7,
        "node": node_name(a),
        "complete": True,
    }
    assert browse(a, queue) == []
    assert browse(b, queue) == []
    held = sorted(message.body.decode() for message in inbox.messages)
    staying.disconnect()
    until_waiting(a, queue, held)


def test_move_and_copy_through_one_node_take_every_waiting_message(
    nodes: list[BrokerProcess],
) -> None:
    """A copy to one queue and a move to another both carry all seven waiting."""
    a, b = nodes
    queue, copies, moved = unique("/queue/moved."), unique("/queue/copies."), unique("/queue/to.")
    staying, _, waiting = read_ahead_on_b(nodes, queue)
    status, answer, _ = call(
        a, "POST", f"destinations/{segment(queue)}/move", {"to": copies, "copy": True}
    )
    assert (status, answer["moved"], answer["complete"]) == (200, 7, True), answer
    assert browse(a, queue) == waiting
    assert browse(b, copies) == waiting
    status, answer, _ = call(a, "POST", f"destinations/{segment(queue)}/move", {"to": moved})
    assert (status, answer["moved"], answer["complete"]) == (200, 7, True), answer
    assert answer["node"] == node_name(a)
    assert browse(a, queue) == []
    # B's read-ahead went back to the tail of the stream before the move.
    assert sorted(browse(b, moved)) == sorted(waiting)
    staying.disconnect()


def test_retry_of_a_dead_letter_queue_sends_every_waiting_one_home(
    nodes: list[BrokerProcess],
) -> None:
    """Dead letters read ahead on B and unread in Redis all go back to their queue."""
    a, b = nodes
    home = unique("/queue/home.")
    dead_letters = "/queue/DLQ." + home.removeprefix("/queue/")
    staying, _, waiting = read_ahead_on_b(
        nodes, dead_letters, {"original-destination": home, "dead-letter-reason": "test"}
    )
    status, answer, _ = call(a, "POST", f"destinations/{segment(dead_letters)}/retry", {})
    assert status == 200, answer
    assert (answer["retried"], answer["left"], answer["complete"]) == (7, 0, True)
    assert browse(a, dead_letters) == []
    status, messages, _ = call(b, "GET", f"destinations/{segment(home)}/messages?count=100")
    assert sorted(message["body"] for message in messages) == sorted(waiting)
    assert all("dead-letter-reason" not in message["headers"] for message in messages)
    staying.disconnect()


def test_a_node_that_does_not_answer_makes_the_answer_incomplete(
    nodes: list[BrokerProcess],
) -> None:
    """
    With node B stopped, node A's browse is a 503 naming B, and its purge
    removes what waits in Redis (four) but not B's read-ahead, saying
    ``complete: false``; both within a bounded time.  Once B runs again, its
    read-ahead waits, browsable.
    """
    a, b = nodes
    queue = unique("/queue/stalled.")
    staying, _, waiting = read_ahead_on_b(nodes, queue)
    b_name = node_name(b)
    os.kill(b.pid, signal.SIGSTOP)
    try:
        started = time.monotonic()
        status, answer, headers = call(a, "GET", f"destinations/{segment(queue)}/messages")
        assert time.monotonic() - started < BOUND
        assert status == 503, answer
        assert (answer["error"], answer["missing"]) == ("cluster incomplete", [b_name])
        assert answer["node"] == headers["stompbroker-node"] == node_name(a)
        started = time.monotonic()
        status, answer, _ = call(a, "DELETE", f"destinations/{segment(queue)}/messages")
        assert time.monotonic() - started < BOUND
    finally:
        os.kill(b.pid, signal.SIGCONT)
    assert status == 200, answer
    assert answer == {
        "destination": queue,
        "vhost": "/",
        "purged": 4,
        "node": node_name(a),
        "complete": False,
        "missing": [b_name],
    }
    until_waiting(a, queue, waiting[:3])
    staying.disconnect()
