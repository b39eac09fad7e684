"""
A policy's ``max-length`` on the redis engine's shared queues: a real
``redis-server`` and two ``twistd`` nodes.  A policy set through node A's API
limits the stream a SEND on node B adds to: ``reject-publish`` answers a
persistent SEND, and a fire-and-forget one, with an ERROR naming the limit and
the policy; ``drop-head`` keeps the newest messages; ``dead-letter`` moves the
oldest to the dead-letter queue; ``message-ttl`` expires what a SEND on B left
waiting, on whichever node reads it (docs/policies.md, "With the redis engine").
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
import redis

from benchmarks.launcher import LOOPBACK_HTTP
from tests.support.clients import connect, publish
from tests.support.policy_calls import WAIT, call, eventually, names
from tests.support.process import BrokerProcess
from tests.support.redis import RedisServer, redis_server, started_nodes  # noqa: F401


@pytest.fixture(scope="module")
def nodes(
    redis_server: RedisServer,  # noqa: F811
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[list[BrokerProcess]]:
    """Nodes A and B on one Redis, each with the management API."""
    with started_nodes(tmp_path_factory, redis_server, "ab", http=LOOPBACK_HTTP) as started:
        yield started


def set_policy(
    a: BrokerProcess, b: BrokerProcess, name: str, definition: dict[str, object]
) -> None:
    """Set a policy on ``a`` and wait until ``b`` has it."""
    status, answer = call(
        a,
        "PUT",
        f"policies/{name}",
        {"pattern": f"{name}.>", "apply-to": "queues", "definition": definition},
    )
    assert status == 200, answer
    eventually(lambda: name in names(b))


def test_reject_publish_set_on_one_node_refuses_a_persistent_send_on_another(
    nodes: list[BrokerProcess],
) -> None:
    a, b = nodes
    set_policy(a, b, "capped", {"max-length": 3, "overflow": "reject-publish"})
    publish(b.address, "/queue/capped.orders", ["m0", "m1", "m2"], persistent="true")
    connection, inbox = connect(b.address)
    connection.send("/queue/capped.orders", "m3", headers={"persistent": "true"}, receipt="fourth")
    assert inbox.wait_for(lambda: bool(inbox.errors), WAIT)
    error = inbox.errors[0]
    assert "fourth" not in inbox.receipts
    assert error.headers["receipt-id"] == "fourth"
    assert "max-length 3" in error.body.decode() and "policy capped" in error.body.decode()

    # The queue holds the three first, in order, and nothing more.
    reader, got = connect(a.address)
    reader.subscribe("/queue/capped.orders", id="1")
    assert got.wait_for(lambda: len(got.messages) == 3, WAIT)
    assert got.bodies() == [b"m0", b"m1", b"m2"]
    reader.disconnect()


def test_reject_publish_answers_a_fire_and_forget_send_with_an_error(
    nodes: list[BrokerProcess],
) -> None:
    a, b = nodes
    set_policy(a, b, "full", {"max-length": 1, "overflow": "reject-publish"})
    publish(b.address, "/queue/full.jobs", ["first"])
    connection, inbox = connect(b.address)
    connection.send("/queue/full.jobs", "second")
    assert inbox.wait_for(lambda: bool(inbox.errors), WAIT)
    assert "max-length 1" in inbox.errors[0].body.decode()
    assert "policy full" in inbox.errors[0].body.decode()


def test_drop_head_set_on_one_node_keeps_the_newest_of_sends_on_another(
    nodes: list[BrokerProcess],
) -> None:
    a, b = nodes
    set_policy(a, b, "newest", {"max-length": 3})
    publish(b.address, "/queue/newest.prices", [f"p{i}" for i in range(5)])
    publish(b.address, "/queue/newest.prices", ["p5", "p6"], persistent="true")
    reader, got = connect(a.address)
    reader.subscribe("/queue/newest.prices", id="1")
    assert got.wait_for(lambda: len(got.messages) == 3, WAIT)
    assert got.bodies() == [b"p4", b"p5", b"p6"]
    reader.disconnect()


def test_dead_letter_overflow_set_on_one_node_moves_the_oldest_of_sends_on_another(
    nodes: list[BrokerProcess],
) -> None:
    a, b = nodes
    set_policy(a, b, "spill", {"max-length": 2, "overflow": "dead-letter"})
    publish(b.address, "/queue/spill.jobs", ["j0", "j1", "j2"])
    publish(b.address, "/queue/spill.jobs", ["j3"], persistent="true")
    reader, got = connect(a.address)
    reader.subscribe("/queue/spill.jobs", id="1")
    reader.subscribe("/queue/DLQ.spill.jobs", id="2")
    assert got.wait_for(lambda: len(got.messages) == 4, WAIT)
    kept = [m.body for m in got.messages if m.headers["subscription"] == "1"]
    dead = [m for m in got.messages if m.headers["subscription"] == "2"]
    assert kept == [b"j2", b"j3"]
    assert [m.body for m in dead] == [b"j0", b"j1"]
    for message in dead:
        assert message.headers["dead-letter-reason"] == "maxlen"
        assert message.headers["original-destination"] == "/queue/spill.jobs"
        assert message.headers["destination"] == "/queue/DLQ.spill.jobs"
    assert len({m.headers["message-id"] for m in got.messages}) == 4
    reader.disconnect()


def test_message_ttl_set_on_one_node_expires_sends_on_another_wherever_read(
    nodes: list[BrokerProcess],
) -> None:
    a, b = nodes
    set_policy(a, b, "brief", {"message-ttl": 300})
    publish(b.address, "/queue/brief.quotes", ["q0", "q1"])
    publish(b.address, "/queue/brief.quotes", ["q2"], persistent="true")
    # Their own, later expiry does not outlast the policy's.
    publish(b.address, "/queue/brief.quotes", ["q3"], expires=str(int(time.time() * 1000) + 60_000))
    time.sleep(0.6)
    publish(b.address, "/queue/brief.quotes", ["fresh"])
    reader, got = connect(a.address)
    reader.subscribe("/queue/brief.quotes", id="1")
    # The stream is in order: a message that had not expired would come before this one.
    assert got.wait_for(lambda: b"fresh" in got.bodies(), WAIT)
    assert got.bodies() == [b"fresh"]
    reader.disconnect()


def test_max_length_bytes_reject_publish_set_on_one_node_refuses_a_send_on_another(
    nodes: list[BrokerProcess],
) -> None:
    """Two 4-byte bodies fill 10 bytes: the third SEND on B gets the ERROR naming the limit."""
    a, b = nodes
    set_policy(a, b, "bytecap", {"max-length-bytes": 10, "overflow": "reject-publish"})
    publish(b.address, "/queue/bytecap.jobs", ["abcd", "efgh"], persistent="true")
    connection, inbox = connect(b.address)
    connection.send("/queue/bytecap.jobs", "ijkl", headers={"persistent": "true"}, receipt="third")
    assert inbox.wait_for(lambda: bool(inbox.errors), WAIT)
    assert "third" not in inbox.receipts
    assert "max-length-bytes 10" in inbox.errors[0].body.decode()
    assert "policy bytecap" in inbox.errors[0].body.decode()


def test_max_length_bytes_counts_down_as_a_consumer_on_another_node_acknowledges(
    nodes: list[BrokerProcess],
    redis_server: RedisServer,  # noqa: F811
) -> None:
    """
    A consumer on A acknowledges one of the two messages that filled the queue
    on B's SENDs: the stream's byte count in Redis goes down by its body, and
    one more fits again.
    """
    a, b = nodes
    set_policy(a, b, "bytedown", {"max-length-bytes": 10, "overflow": "reject-publish"})
    publish(b.address, "/queue/bytedown.jobs", ["abcd", "efghij"], persistent="true")
    counter = redis.Redis(port=redis_server.port)
    key = "stompbroker:{q:/queue/bytedown.jobs}:bytes"
    assert int(counter.get(key) or 0) == 10
    reader, got = connect(a.address)
    reader.subscribe(
        "/queue/bytedown.jobs",
        id="1",
        ack="client-individual",
        headers={"activemq.prefetchSize": "1"},
    )
    assert got.wait_for(lambda: len(got.messages) == 1, WAIT)
    reader.ack(got.messages[0].headers["ack"], receipt="acked")
    assert got.wait_for(lambda: "acked" in got.receipts, WAIT)
    eventually(lambda: int(counter.get(key) or 0) == 6)
    reader.disconnect()
    publish(b.address, "/queue/bytedown.jobs", ["kl"], persistent="true")
    assert int(counter.get(key) or 0) == 8
    counter.close()


def test_max_length_bytes_drop_head_keeps_the_newest_bytes_of_sends_on_another(
    nodes: list[BrokerProcess],
) -> None:
    """Five 4-byte bodies under 10 bytes: the last two stay, fire-and-forget or persistent."""
    a, b = nodes
    set_policy(a, b, "bytenew", {"max-length-bytes": 10})
    publish(b.address, "/queue/bytenew.prices", ["p000", "p001", "p002"])
    publish(b.address, "/queue/bytenew.prices", ["p003", "p004"], persistent="true")
    reader, got = connect(a.address)
    reader.subscribe("/queue/bytenew.prices", id="1")
    assert got.wait_for(lambda: len(got.messages) == 2, WAIT)
    assert got.bodies() == [b"p003", b"p004"]
    reader.disconnect()


def test_max_length_bytes_dead_letter_moves_the_oldest_of_sends_on_another(
    nodes: list[BrokerProcess],
) -> None:
    """The bodies pushed out go to the dead-letter queue, marked maxlen, as on one node."""
    a, b = nodes
    set_policy(a, b, "bytespill", {"max-length-bytes": 8, "overflow": "dead-letter"})
    publish(b.address, "/queue/bytespill.jobs", ["j000", "j001", "j002"], persistent="true")
    reader, got = connect(a.address)
    reader.subscribe("/queue/bytespill.jobs", id="1")
    reader.subscribe("/queue/DLQ.bytespill.jobs", id="2")
    assert got.wait_for(lambda: len(got.messages) == 3, WAIT)
    kept = [m.body for m in got.messages if m.headers["subscription"] == "1"]
    dead = [m for m in got.messages if m.headers["subscription"] == "2"]
    assert kept == [b"j001", b"j002"]
    assert [m.body for m in dead] == [b"j000"]
    assert dead[0].headers["dead-letter-reason"] == "maxlen"
    assert dead[0].headers["original-destination"] == "/queue/bytespill.jobs"
    reader.disconnect()
