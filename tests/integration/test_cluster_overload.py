"""
Load is back-pressure, never an ERROR (docs/cluster.md, "Redis busy, Redis full"):
a Redis that answers slowly holds publishers but sends none an ERROR; a Redis
that would evict keys is refused at start; a full one refuses messages with a
clear ERROR.
"""

from __future__ import annotations

import threading
import time
import uuid
from pathlib import Path

import pytest

pytest.importorskip("redis")

import redis  # noqa: E402

from benchmarks.connection import Endpoint, Link  # noqa: E402
from benchmarks.wire import encode_frame  # noqa: E402
from tests.support.clients import connect  # noqa: E402
from tests.support.process import broker_arguments, free_port, run_twistd  # noqa: E402
from tests.support.redis import RedisServer, node  # noqa: E402


def test_a_redis_slower_than_the_reply_timeout_of_old_holds_the_receipt_and_sends_no_error(
    tmp_path: Path,
) -> None:
    """
    Redis applies no write for 7 s (``CLIENT PAUSE ... WRITE``) but answers PING: past the
    old 5 s reply timeout and past --engine-outage-hold 1, the RECEIPT comes once the writes
    go through, and the publisher gets no ERROR.
    """
    server = RedisServer(tmp_path)
    (tmp_path / "a").mkdir()
    a = node(tmp_path / "a", server, "--engine-outage-hold", "1", "--engine-ping-timeout", "1")
    queue = f"/queue/slow.{uuid.uuid4().hex[:8]}"
    control = redis.Redis(port=server.port)
    try:
        publisher, sent = connect(a.address)
        publisher.send(queue, b"before", headers={"persistent": "true"}, receipt="r1")
        assert sent.wait_for(lambda: "r1" in sent.receipts)
        control.execute_command("CLIENT", "PAUSE", 7000, "WRITE")
        paused = time.monotonic()
        publisher.send(queue, b"slow", headers={"persistent": "true"}, receipt="r2")
        assert sent.wait_for(lambda: "r2" in sent.receipts or bool(sent.errors), timeout=20)
        assert sent.errors == []
        assert time.monotonic() - paused >= 6
        consumer, inbox = connect(a.address)
        consumer.subscribe(queue, id="c", ack="auto")
        assert inbox.wait_for(lambda: inbox.bodies() == [b"before", b"slow"])
        assert "unreachable" not in a.log()
        publisher.disconnect()
        consumer.disconnect()
    finally:
        control.close()
        a.stop()
        server.stop()


def test_a_paused_redis_pauses_publishers_past_the_writers_bound_and_loses_nothing(
    tmp_path: Path,
) -> None:
    """
    Redis applies no write for 6 s while a publisher sends 100 000 plain queue messages
    (about 18 MB): the node stops reading it once its writer holds 8 MB, says so, and reads
    it again once Redis catches up; every message reaches the queue and nobody gets an ERROR.
    """
    server = RedisServer(tmp_path)
    (tmp_path / "a").mkdir()
    a = node(tmp_path / "a", server, "--engine-outage-hold", "1", "--engine-ping-timeout", "1")
    queue = f"/queue/flood.{uuid.uuid4().hex[:8]}"
    control = redis.Redis(port=server.port)
    count = 100_000
    frame = encode_frame("SEND", [("destination", queue)], b"x" * 117)
    try:
        link = Link(Endpoint(*a.address), timeout=10)
        control.execute_command("CLIENT", "PAUSE", 6000, "WRITE")
        sender = threading.Thread(target=link.sock.sendall, args=(frame * count,), daemon=True)
        sender.start()
        deadline = time.monotonic() + 5
        while "Redis lags behind the publishers" not in a.log() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert "Redis lags behind the publishers" in a.log()
        # Paused: the node reads no more of it until Redis catches up.
        assert sender.is_alive()
        sender.join(timeout=60)
        assert not sender.is_alive()
        stream = f"stompbroker:{{q:{queue}}}"
        deadline = time.monotonic() + 30
        while control.xlen(stream) < count and time.monotonic() < deadline:
            time.sleep(0.2)
        assert control.xlen(stream) == count
        link.sock.sendall(encode_frame("DISCONNECT", [("receipt", "bye")]))
        assert b"ERROR" not in link.sock.recv(65536)
        assert "unreachable" not in a.log()
        link.close()
    finally:
        control.close()
        a.stop()
        server.stop()


def test_a_redis_that_evicts_keys_stops_the_node_at_start(tmp_path: Path) -> None:
    """maxmemory with an evicting policy: one clear line, exit status 1."""
    server = RedisServer(tmp_path)
    control = redis.Redis(port=server.port)
    try:
        control.config_set("maxmemory", "100mb")
        control.config_set("maxmemory-policy", "allkeys-lru")
        result = run_twistd(
            *broker_arguments(free_port(), None, "uvloop", "--engine", server.url), cwd=tmp_path
        )
        output = result.stdout
        assert result.returncode == 1, output
        assert "maxmemory-policy allkeys-lru" in output
        assert "set maxmemory-policy noeviction" in output
    finally:
        control.close()
        server.stop()


def test_a_full_redis_refuses_messages_with_an_error_that_says_so(tmp_path: Path) -> None:
    """
    maxmemory reached with noeviction: a persistent SEND and a plain queue SEND get an
    ERROR that says Redis is full; once consumers made room, messages go through again.
    """
    server = RedisServer(tmp_path)
    (tmp_path / "a").mkdir()
    a = node(tmp_path / "a", server)
    control = redis.Redis(port=server.port)
    queue = f"/queue/full.{uuid.uuid4().hex[:8]}"
    body = b"x" * 50_000
    try:
        used = int(control.info("memory")["used_memory"])
        control.config_set("maxmemory", used + 2_000_000)
        publisher, sent = connect(a.address)
        for number in range(200):
            publisher.send(queue, body, headers={"persistent": "true"}, receipt=f"r{number}")
            if sent.wait_for(lambda: bool(sent.errors), timeout=0.05):
                break
        assert sent.wait_for(lambda: bool(sent.errors), timeout=10)
        told = sent.errors[0].headers["message"] + sent.errors[0].body.decode()
        assert sent.errors[0].headers["message"] == "broker full"
        assert "maxmemory" in told
        plain, plain_sent = connect(a.address)
        for _ in range(100):
            plain.send(queue, body)
            if plain_sent.wait_for(lambda: bool(plain_sent.errors), timeout=0.1):
                break
        assert plain_sent.errors
        assert plain_sent.errors[0].headers["message"] == "broker full"
        assert "maxmemory" in plain_sent.errors[0].body.decode()
        control.config_set("maxmemory", 0)
        time.sleep(1.5)
        again, again_sent = connect(a.address)
        again.send(queue, b"room", receipt="ok")
        assert again_sent.wait_for(lambda: "ok" in again_sent.receipts)
        assert again_sent.errors == []
        again.disconnect()
    finally:
        control.close()
        a.stop()
        server.stop()
