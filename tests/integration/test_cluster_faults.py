"""
The redis engine's faults, for real: a node SIGKILLed, Redis restarted, a Redis
that refuses the password (docs/cluster.md, "Liveness and dead nodes", "Redis away").
"""

from __future__ import annotations

import socket
import subprocess
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from benchmarks.errors import BrokerStartFailed
from tests.support.clients import connect
from tests.support.process import BrokerProcess, subprocess_env, twistd_command
from tests.support.redis import (  # noqa: F401
    NODE_TIMEOUT,
    RedisServer,
    node,
    redis_server,
    started_nodes,
)


def published_until_heard(
    address: tuple[str, int], topic: str, body: bytes, inbox: Any, seconds: float = 10
) -> bool:
    """
    Send ``body`` to ``topic`` through a node until ``inbox`` (a subscriber on another node)
    has it: topics are at most once, so what is published before that node has subscribed
    again is lost.

    :returns: whether the subscriber heard it within ``seconds``.
    """
    publisher, _ = connect(address)
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and body not in inbox.bodies():
        publisher.send(topic, body)
        inbox.wait_for(lambda: body in inbox.bodies(), timeout=0.5)
    publisher.disconnect()
    return body in inbox.bodies()


def test_a_killed_nodes_unacknowledged_messages_go_to_another_node(
    redis_server: RedisServer,  # noqa: F811
    tmp_path: Path,
) -> None:
    """What a SIGKILLed node's consumer held is redelivered on another node within the timeout."""
    (tmp_path / "doomed").mkdir()
    (tmp_path / "survivor").mkdir()
    doomed = node(tmp_path / "doomed", redis_server)
    survivor = node(tmp_path / "survivor", redis_server)
    queue = f"/queue/kill.{uuid.uuid4().hex[:8]}"
    try:
        holder, held = connect(doomed.address)
        holder.subscribe(
            queue, id="h", ack="client-individual", headers={"prefetch-count": 3}, receipt="on"
        )
        assert held.wait_for(lambda: "on" in held.receipts)
        publisher, sent = connect(survivor.address)
        for n in range(3):
            publisher.send(queue, f"m{n}".encode(), headers={"persistent": "true"})
        publisher.send(queue, b"m3", headers={"persistent": "true"}, receipt="stored")
        assert sent.wait_for(lambda: "stored" in sent.receipts)
        assert held.wait_for(lambda: len(held.messages) == 3)
        doomed.process.kill()
        doomed.process.wait(timeout=10)
        taker, taken = connect(survivor.address)
        taker.subscribe(queue, id="t", ack="client-individual")
        started = time.monotonic()
        assert taken.wait_for(lambda: len(taken.messages) == 4, timeout=3 * float(NODE_TIMEOUT) + 2)
        elapsed = time.monotonic() - started
        assert sorted(taken.bodies()) == [b"m0", b"m1", b"m2", b"m3"]
        redelivered = [m for m in taken.messages if m.headers.get("redelivered") == "true"]
        assert len(redelivered) == 3
        assert elapsed <= 1.5 * float(NODE_TIMEOUT) + 1.5
        publisher.disconnect()
        taker.disconnect()
    finally:
        doomed.stop()
        survivor.stop()


def test_a_node_whose_pubsub_connection_redis_closes_says_so_and_hears_topics_again(
    redis_server: RedisServer,  # noqa: F811
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """
    Redis closing a node's pub/sub connection (as it does to a node that reads too slowly) is
    logged when the node is subscribed again, and cross-node topic messages flow again.
    """
    topic = f"/topic/closed.{uuid.uuid4().hex[:8]}"
    with started_nodes(tmp_path_factory, redis_server, "ab") as (a, b):
        subscriber, inbox = connect(b.address)
        subscriber.subscribe(topic, id="t", receipt="ok")
        assert inbox.wait_for(lambda: "ok" in inbox.receipts)
        with socket.create_connection(("127.0.0.1", redis_server.port), timeout=5) as redis:
            redis.sendall(b"CLIENT KILL TYPE pubsub\r\n")
            assert redis.recv(64).startswith(b":")  # how many connections it closed
        assert published_until_heard(a.address, topic, b"after", inbox, seconds=15)
        assert "pub/sub connection and it is subscribed again" in b.log()
        assert not inbox.disconnected
        subscriber.disconnect()


def test_nodes_come_back_after_redis_restarts(tmp_path: Path) -> None:
    """
    Redis restarted (AOF on): past --engine-outage-hold a publisher is told that Redis is
    unreachable and for how long, then all works again.
    """
    server = RedisServer(tmp_path)
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    a = node(tmp_path / "a", server, "--engine-outage-hold", "1")
    b = node(tmp_path / "b", server, "--engine-outage-hold", "1")
    queue = f"/queue/restart.{uuid.uuid4().hex[:8]}"
    try:
        consumer, inbox = connect(b.address)
        consumer.subscribe(queue, id="c", ack="auto")
        subscriber, topic_inbox = connect(b.address)
        subscriber.subscribe("/topic/restart", id="t", receipt="ok")
        assert topic_inbox.wait_for(lambda: "ok" in topic_inbox.receipts)
        publisher, sent = connect(a.address)
        publisher.send(queue, b"before", headers={"persistent": "true"}, receipt="r1")
        assert sent.wait_for(lambda: "r1" in sent.receipts)
        assert inbox.wait_for(lambda: b"before" in inbox.bodies())
        server.stop()
        time.sleep(0.5)
        publisher.send(queue, b"while-away", headers={"persistent": "true"}, receipt="r2")
        assert sent.wait_for(lambda: bool(sent.errors), timeout=10)
        told = sent.errors[0].body.decode() + sent.errors[0].headers["message"]
        assert "unreachable for" in told and "--engine-outage-hold" in told
        server.start()
        # The subscribers kept their connections; a new publisher gets through.
        deadline = time.monotonic() + 15
        delivered = False
        while time.monotonic() < deadline and not delivered:
            again, again_sent = connect(a.address)
            again.send(queue, b"after", headers={"persistent": "true"}, receipt="r3")
            delivered = again_sent.wait_for(
                lambda collector=again_sent: "r3" in collector.receipts, timeout=2
            )
            again.disconnect()
        assert delivered
        assert inbox.wait_for(lambda: b"after" in inbox.bodies(), timeout=10)
        # Topics are at-most-once: what is published before node B has subscribed
        # again is lost, so publish until B's subscriber hears one.
        assert published_until_heard(a.address, "/topic/restart", b"topic-after", topic_inbox)
        assert not inbox.disconnected and not topic_inbox.disconnected
    finally:
        a.stop()
        b.stop()
        server.stop()


def test_a_redis_that_refuses_the_password_stops_the_node_at_start(tmp_path: Path) -> None:
    """A wrong password stops twistd at start with a clear message that shows no password."""
    server = RedisServer(tmp_path, password="right-one")
    try:
        url = f"redis://:wrong-one@127.0.0.1:{server.port}/0"
        result = subprocess.run(
            [
                *twistd_command(), "--nodaemon", "--pidfile=", "--logfile=-", "-r", "uvloop",
                "stompbroker", "--port", "0", "--http", "none", "--engine", url,
            ],
            cwd=tmp_path,
            env=subprocess_env(),
            capture_output=True,
            timeout=30,
        )
        output = (result.stdout + result.stderr).decode(errors="replace")
        assert result.returncode != 0
        assert "refused the login" in output
        assert "wrong-one" not in output
    finally:
        server.stop()


def test_the_redis_engine_refuses_a_reactor_without_asyncio(
    redis_server: RedisServer,  # noqa: F811
    tmp_path: Path,
) -> None:
    """On twistd's default reactor the node stops at start and says to use -r uvloop."""
    with pytest.raises(BrokerStartFailed):
        BrokerProcess(tmp_path, "--engine", redis_server.url, http=None)
    log = (tmp_path / "stompbroker.log").read_text()
    assert "-r uvloop" in log
