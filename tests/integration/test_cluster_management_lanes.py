"""
The management API on the redis engine acts on every priority lane of a
``/queue/``: a real ``redis-server`` and two ``twistd`` nodes; a producer sends
messages of mixed priorities on node A, the API is called on node B.  A browse
shows them in the order one node hands them out, a purge empties every lane, a
move, a copy and a dead-letter retry keep each message's priority, and what a
copy, a move or a dead letter adds to a queue under a byte limit is counted in
its byte counters (docs/cluster.md, "Management across nodes").
"""

from __future__ import annotations

import urllib.request
from collections.abc import Iterator

import pytest
import redis

from benchmarks.launcher import LOOPBACK_HTTP
from tests.support.clients import connect
from tests.support.policy_calls import WAIT, call, eventually, names
from tests.support.process import BrokerProcess
from tests.support.redis import RedisServer, redis_server, started_nodes  # noqa: F401

#: The issue's mixed priorities, in send order.
PRIORITIES = [5, 2, 6, 0, 1, 8, 1, 5, 9, 0, 8, 3, 0, 1, 6, 6, 1, 3, 1, 8]
#: What one node hands them out as: highest first, in send order within one.
ONE_NODE = [9, 8, 8, 8, 6, 6, 6, 5, 5, 3, 3, 2, 1, 1, 1, 1, 1, 0, 0, 0]
PREFIX = "stompbroker"


@pytest.fixture(scope="module")
def nodes(
    redis_server: RedisServer,  # noqa: F811
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[list[BrokerProcess]]:
    """Nodes A and B on one Redis, each with the management API."""
    with started_nodes(tmp_path_factory, redis_server, "ab", http=LOOPBACK_HTTP) as started:
        yield started


@pytest.fixture
def store(redis_server: RedisServer) -> Iterator[redis.Redis]:  # noqa: F811
    client = redis.Redis(port=redis_server.port)
    yield client
    client.close()


def body(index: int, priority: int) -> str:
    return f"m{index:02d}-p{priority}"


def sent_bodies() -> list[str]:
    return [body(index, priority) for index, priority in enumerate(PRIORITIES)]


def in_one_node_order(bodies: list[str]) -> list[str]:
    """``bodies`` (named by :func:`body`) as one node hands them out."""
    return sorted(bodies, key=lambda text: -int(text.rpartition("p")[2]))


def send_mixed(
    process: BrokerProcess,
    queue: str,
    *,
    lanes: bool = True,
    indexes: range = range(len(PRIORITIES)),
    **headers: str,
) -> None:
    """
    Send the twenty messages of :data:`PRIORITIES` (those of ``indexes``),
    persistent, each with a receipt; with ``lanes`` false, all of the default
    priority.
    """
    connection, events = connect(process.address)
    for index in indexes:
        priority = PRIORITIES[index]
        if lanes:
            headers["priority"] = str(priority)
        connection.send(
            queue,
            body(index, priority),
            headers={"persistent": "true", **headers},
            receipt=f"s{index}",
        )
    assert events.wait_for(lambda: len(events.receipts) == len(indexes), WAIT)
    connection.disconnect()


def segment(destination: str) -> str:
    return urllib.request.quote(destination, safe="")


def browse(process: BrokerProcess, queue: str, count: int = 100) -> list[str]:
    status, answer = call(process, "GET", f"destinations/{segment(queue)}/messages?count={count}")
    assert status == 200, answer
    return [message["body"] for message in answer]


def node_name(process: BrokerProcess) -> str:
    _, listed = call(process, "GET", "nodes")
    return str(next(node["name"] for node in listed if node["here"]))


def lane_lengths(store: redis.Redis, queue: str) -> dict[int, int]:
    """:returns: priority -> entries in that lane of ``queue``, for the lanes that hold any."""
    lengths = {}
    for priority in range(10):
        key = (
            f"{PREFIX}:{{q:{queue}}}"
            if priority == 4
            else f"{PREFIX}:{{q:{queue}}}:lane:{priority}"
        )
        length = int(store.xlen(key)) if store.exists(key) else 0
        if length:
            lengths[priority] = length
    return lengths


def counted_bytes(store: redis.Redis, queue: str) -> int:
    """:returns: the sum of the byte counters of ``queue``'s stream and lanes."""
    keys = [f"{PREFIX}:{{q:{queue}}}:bytes"] + [
        f"{PREFIX}:{{q:{queue}}}:lane:{p}:bytes" for p in range(10)
    ]
    return sum(int(value or 0) for value in store.mget(keys))


def set_policy(a: BrokerProcess, b: BrokerProcess, name: str, pattern: str, limit: int) -> None:
    """A ``max-length-bytes`` policy set on ``a``, in force on ``b`` too."""
    status, answer = call(
        a,
        "PUT",
        f"policies/{name}",
        {
            "pattern": pattern,
            "apply-to": "queues",
            "definition": {"max-length-bytes": limit, "overflow": "drop-head"},
        },
    )
    assert status == 200, answer
    eventually(lambda: name in names(b))


def test_browse_through_another_node_shows_every_lane_in_one_node_order(
    nodes: list[BrokerProcess],
) -> None:
    """
    Twenty messages of mixed priorities sent on A; a consumer on A holds the
    two highest unacknowledged.  B's browse shows the other eighteen, highest
    priority first and in send order within one, as one node would; a browse
    of five stops at the fifth.
    """
    a, b = nodes
    queue = "/queue/lanes.browsed"
    send_mixed(a, queue)
    assert browse(b, queue) == in_one_node_order(sent_bodies())
    consumer, inbox = connect(a.address)
    consumer.subscribe(
        queue, id="1", ack="client-individual", headers={"activemq.prefetchSize": "2"}
    )
    assert inbox.wait_for(lambda: len(inbox.messages) == 2, WAIT)
    held = [message.body.decode() for message in inbox.messages]
    assert held == in_one_node_order(sent_bodies())[:2]
    expected = [text for text in in_one_node_order(sent_bodies()) if text not in held]
    assert browse(b, queue) == expected
    assert browse(b, queue, count=5) == expected[:5]
    consumer.disconnect()


def test_purge_through_another_node_empties_every_lane(
    nodes: list[BrokerProcess], store: redis.Redis
) -> None:
    """
    B's purge discards the eighteen waiting in seven lanes and says so, complete;
    what A's consumer holds stays in Redis and comes back when it leaves.
    """
    a, b = nodes
    queue = "/queue/lanes.purged"
    send_mixed(a, queue)
    consumer, inbox = connect(a.address)
    consumer.subscribe(
        queue, id="1", ack="client-individual", headers={"activemq.prefetchSize": "2"}
    )
    assert inbox.wait_for(lambda: len(inbox.messages) == 2, WAIT)
    status, answer = call(b, "DELETE", f"destinations/{segment(queue)}/messages")
    assert status == 200, answer
    assert answer == {
        "destination": queue,
        "vhost": "/",
        "purged": 18,
        "node": node_name(b),
        "complete": True,
    }
    assert browse(a, queue) == []
    assert sum(lane_lengths(store, queue).values()) == 2
    consumer.disconnect()
    held = [message.body.decode() for message in inbox.messages]
    eventually(lambda: browse(b, queue) == held)


def test_move_through_another_node_keeps_every_priority(
    nodes: list[BrokerProcess], store: redis.Redis
) -> None:
    """
    B's move of all twenty puts each in the target's lane of its priority (the
    target's mode hash marks it as having lanes), and a consumer of the target
    gets them in one node's order; a move of three takes the three highest.
    """
    a, b = nodes
    queue, target, few = "/queue/lanes.moved", "/queue/lanes.target", "/queue/lanes.few"
    send_mixed(a, queue)
    status, answer = call(b, "POST", f"destinations/{segment(queue)}/move", {"to": few, "count": 3})
    assert (status, answer["moved"], answer["complete"]) == (200, 3, True), answer
    assert browse(a, few) == in_one_node_order(sent_bodies())[:3]
    status, answer = call(b, "POST", f"destinations/{segment(queue)}/move", {"to": target})
    assert (status, answer["moved"], answer["complete"]) == (200, 17, True), answer
    assert answer["node"] == node_name(b)
    assert lane_lengths(store, queue) == {}
    expected = in_one_node_order(sent_bodies())[3:]
    counts: dict[int, int] = {}
    for text in expected:
        counts[int(text.rpartition("p")[2])] = counts.get(int(text.rpartition("p")[2]), 0) + 1
    assert lane_lengths(store, target) == counts
    assert store.hget(f"{PREFIX}:{{q:{target}}}:mode", "p") == b"1"
    assert browse(a, target) == expected
    reader, got = connect(a.address)
    reader.subscribe(target, id="1")
    assert got.wait_for(lambda: len(got.messages) == 17, WAIT)
    assert [message.body.decode() for message in got.messages] == expected
    reader.disconnect()


def test_copy_through_another_node_keeps_priorities_and_counts_the_bytes(
    nodes: list[BrokerProcess], store: redis.Redis
) -> None:
    """
    B's copy of the first five into a queue under a byte limit adds them to
    its lanes, in one node's order, and its byte counters hold their bodies;
    the source keeps all twenty.  A move of the rest counts in too.
    """
    a, b = nodes
    queue, target = "/queue/lanes.copied", "/queue/bytecopy.target"
    set_policy(a, b, "bytecopy", "bytecopy.>", 100_000)
    send_mixed(a, queue)
    status, answer = call(
        b, "POST", f"destinations/{segment(queue)}/move", {"to": target, "copy": True, "count": 5}
    )
    assert (status, answer["moved"], answer["complete"]) == (200, 5, True), answer
    first = in_one_node_order(sent_bodies())[:5]
    assert browse(a, queue) == in_one_node_order(sent_bodies())
    eventually(lambda: browse(a, target) == first)
    assert counted_bytes(store, target) == sum(len(text) for text in first)
    status, answer = call(b, "POST", f"destinations/{segment(queue)}/move", {"to": target})
    assert (status, answer["moved"]) == (200, 20), answer
    assert counted_bytes(store, target) == sum(len(text) for text in first + sent_bodies())


def test_dead_letters_count_in_their_queues_bytes_and_retry_keeps_priorities(
    nodes: list[BrokerProcess], store: redis.Redis
) -> None:
    """
    A consumer on A that may not redeliver NACKs all twenty: they go to the
    dead-letter queue, under a byte limit, which counts their bodies.  B's
    retry sends them home into their lanes, in one node's order, and the
    dead-letter queue's count goes back to 0.
    """
    a, b = nodes
    home = "/queue/bytedl.home"
    dead_letters = "/queue/DLQ.bytedl.home"
    set_policy(a, b, "bytedl", "DLQ.bytedl.>", 100_000)
    send_mixed(a, home)
    consumer, inbox = connect(a.address)
    consumer.subscribe(home, id="1", ack="client-individual", headers={"max-redeliveries": "0"})
    assert inbox.wait_for(lambda: len(inbox.messages) == 20, WAIT)
    for message in inbox.messages:
        consumer.nack(message.headers["ack"])
    eventually(lambda: sum(lane_lengths(store, dead_letters).values()) == 20)
    consumer.disconnect()
    assert browse(b, dead_letters) == in_one_node_order(sent_bodies())
    assert counted_bytes(store, dead_letters) == sum(len(text) for text in sent_bodies())
    status, answer = call(b, "POST", f"destinations/{segment(dead_letters)}/retry", {})
    assert status == 200, answer
    assert (answer["retried"], answer["left"], answer["complete"]) == (20, 0, True)
    assert counted_bytes(store, dead_letters) == 0
    assert lane_lengths(store, dead_letters) == {}
    status, messages = call(a, "GET", f"destinations/{segment(home)}/messages?count=100")
    assert status == 200, messages
    assert [message["body"] for message in messages] == in_one_node_order(sent_bodies())
    assert all("dead-letter-reason" not in message["headers"] for message in messages)


def feature_queue(nodes: list[BrokerProcess], queue: str) -> list[tuple[object, object]]:
    """
    A consumer with a selector on each node, each holding one message
    unacknowledged: the queue is decided (docs/cluster.md), and what the
    deciding node hands the other node's full consumer waits in that node's
    own stream, unread.  The twenty of mixed priorities sent on A, the first
    alone (a deciding node with room keeps all of a batch it reads).

    :returns: each consumer's connection and inbox.
    """
    consumers = []
    for process in nodes:
        connection, inbox = connect(process.address)
        connection.subscribe(
            queue,
            id="1",
            ack="client-individual",
            headers={"activemq.prefetchSize": "1", "selector": "kind = 'job'"},
            receipt="subscribed",
        )
        assert inbox.wait_for(lambda inbox=inbox: "subscribed" in inbox.receipts, WAIT)
        consumers.append((connection, inbox))
    # The first fills the deciding node's consumer, so that it hands the rest
    # to the other node, whose consumer takes one: the others wait in its own stream.
    send_mixed(nodes[0], queue, indexes=range(1), kind="job")
    eventually(lambda: any(inbox.messages for _, inbox in consumers))
    send_mixed(nodes[0], queue, indexes=range(1, len(PRIORITIES)), kind="job")
    for _, inbox in consumers:
        assert inbox.wait_for(lambda inbox=inbox: len(inbox.messages) == 1, WAIT)
    return consumers


def priority_of(text: str) -> int:
    return int(text.rpartition("p")[2])


def test_browse_purge_and_move_of_a_decided_queue_reach_the_nodes_own_streams(
    nodes: list[BrokerProcess], store: redis.Redis
) -> None:
    """
    With selectors on both nodes, B's browse shows the eighteen waiting in a
    node's own stream in one node's order; B's move of eight takes the eight
    first into the target's lanes; B's purge discards the ten left, complete,
    leaving only the two the consumers hold.
    """
    a, b = nodes
    queue, target = "/queue/lanes.decided", "/queue/lanes.decided.target"
    consumers = feature_queue(nodes, queue)
    held = [inbox.messages[0].body.decode() for _, inbox in consumers]
    waiting = [text for text in sent_bodies() if text not in held]
    assert browse(b, queue) == in_one_node_order(waiting)
    own = [key.decode() for key in store.scan_iter(match=f"{PREFIX}:{{q:{queue}}}:node:*")]
    assert sum(int(store.xlen(key)) for key in own) > 0
    status, answer = call(
        b, "POST", f"destinations/{segment(queue)}/move", {"to": target, "count": 8}
    )
    assert (status, answer["moved"], answer["complete"]) == (200, 8, True), answer
    assert browse(a, target) == in_one_node_order(waiting)[:8]
    status, answer = call(b, "DELETE", f"destinations/{segment(queue)}/messages")
    assert status == 200, answer
    assert (answer["purged"], answer["complete"]) == (10, True), answer
    assert browse(b, queue) == []
    left = sum(lane_lengths(store, queue).values()) + sum(int(store.xlen(key)) for key in own)
    assert left == 2
    for connection, _ in consumers:
        connection.disconnect()


def test_a_queue_browser_and_the_depth_on_another_node_see_every_lane(
    nodes: list[BrokerProcess],
) -> None:
    """
    A ``browser:true`` subscription on B sees the twenty sent on A in one node's
    order, and B's ``/api/destinations`` counts all twenty waiting (the figures
    read every lane).
    """
    a, b = nodes
    queue = "/queue/lanes.browser"
    send_mixed(a, queue)
    connection, inbox = connect(b.address)
    connection.subscribe(queue, id="browse", headers={"browser": "true"})
    assert inbox.wait_for(
        lambda: any(m.headers.get("browser") == "end" for m in inbox.messages), WAIT
    )
    seen = [m.body.decode() for m in inbox.messages if m.headers.get("browser") != "end"]
    assert seen == in_one_node_order(sent_bodies())
    connection.disconnect()

    def depth() -> int:
        status, answer = call(b, "GET", "destinations")
        assert status == 200, answer
        return sum(int(entry["depth"]) for entry in answer if entry["destination"] == queue)

    eventually(lambda: depth() == 20)
