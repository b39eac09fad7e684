"""
``--workers 2`` on the redis engine, end to end: one ``twistd`` supervisor, its
two worker processes sharing its STOMP and web ports on a real ``redis-server``,
each a node of the cluster (docs/cluster.md).
"""

from __future__ import annotations

import json
import os
import signal
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.clients import Collector, connect, publish
from tests.support.process import BrokerProcess, free_port, run_broker_to_its_end, run_python
from tests.support.redis import NODE_TIMEOUT, RedisServer, redis_server  # noqa: F401
from tests.support.resume import cut, resumable, subscribed

#: Bounded waits, in seconds.
WAIT = 15.0


@pytest.fixture(scope="module")
def supervisor(
    redis_server: RedisServer,  # noqa: F811
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[BrokerProcess]:
    """
    A broker of two workers behind one STOMP port and one web port, given a data
    directory and a disk alarm that a store on it would be in at once: workers
    keep no messages on their disk (Redis does), so neither applies.
    """
    workdir = tmp_path_factory.mktemp("workers")
    process = BrokerProcess(
        workdir,
        *("--data-dir", str(workdir / "data"), "--disk-free-limit", "99%"),
        "--engine",
        f"{redis_server.url}?prefix=workers",
        "--node-timeout",
        NODE_TIMEOUT,
        "--workers",
        "2",
        reactor="uvloop",
    )
    # The supervisor listens at once; its workers take a moment to start.
    deadline = time.monotonic() + WAIT
    while len(nodes(process)) < 2 and time.monotonic() < deadline:
        time.sleep(0.2)
    yield process
    process.stop()


def nodes(process: BrokerProcess) -> list[str]:
    """:returns: the live nodes' names, as ``stompbroker nodes --json`` lists them."""
    url = f"http://127.0.0.1:{process.http_port}"
    result = run_python("-m", "stompbroker.app.cli", "nodes", "--json", "--url", url)
    assert result.returncode == 0, result.stderr
    return [entry["name"] for entry in json.loads(result.stdout)]


def workers_of(process: BrokerProcess) -> set[int]:
    """:returns: the pids of the supervisor's children (its workers), from /proc."""
    children = Path(f"/proc/{process.pid}/task/{process.pid}/children").read_text()
    return {int(pid) for pid in children.split()}


class Sessions(Collector):
    """A listener that also keeps the CONNECTED frame's session id."""

    session = ""

    def on_connected(self, frame: Any) -> None:
        self.session = frame.headers["session"]


def by_node(process: BrokerProcess) -> dict[str, tuple[Any, Sessions]]:
    """
    Connect until connections have reached both workers (bounded).

    :returns: node name -> one connection on it, and its listener.
    """
    found: dict[str, tuple[Any, Sessions]] = {}
    spare = []
    for _ in range(60):
        listener = Sessions()
        connection, _ = connect(process.address, collector=listener)
        node = listener.session.split("-")[1]
        if node in found:
            spare.append(connection)
        else:
            found[node] = (connection, listener)
        if len(found) == 2:
            break
    for connection in spare:
        connection.disconnect()
    return found


def test_workers_share_the_ports_and_act_as_one_broker(supervisor: BrokerProcess) -> None:
    """
    Connections to the one STOMP port reach both workers, each a node, and a
    message sent on one worker reaches a subscriber on the other.
    """
    found = by_node(supervisor)
    assert len(found) == 2, list(found)
    assert sorted(nodes(supervisor)) == sorted(found)
    (subscriber, inbox), (publisher, _) = found.values()
    subscriber.subscribe("/topic/workers.shared", id="s", receipt="subscribed")
    assert inbox.wait_for(lambda: "subscribed" in inbox.receipts)
    publisher.send("/topic/workers.shared", b"across")
    assert inbox.wait_for(lambda: inbox.bodies() == [b"across"])
    for connection, _ in found.values():
        connection.disconnect()


def test_a_worker_killed_is_started_again(supervisor: BrokerProcess) -> None:
    """A worker SIGKILLed is replaced by a new one, and the broker serves on both again."""
    before = workers_of(supervisor)
    assert len(before) == 2
    victim = min(before)
    os.kill(victim, signal.SIGKILL)
    deadline = time.monotonic() + WAIT
    while time.monotonic() < deadline:
        now = workers_of(supervisor)
        if len(now) == 2 and victim not in now:
            break
        time.sleep(0.2)
    assert len(now) == 2 and victim not in now, now
    deadline = time.monotonic() + WAIT
    found: dict[str, Any] = {}
    while time.monotonic() < deadline and len(found) < 2:
        found = by_node(supervisor)
        for connection, _ in found.values():
            connection.disconnect()
    assert len(found) == 2


def test_workers_keep_no_store_and_hold_no_persistent_publisher(
    supervisor: BrokerProcess,
) -> None:
    """
    --data-dir and --disk-free-limit do nothing on the workers: persistent SENDs
    on either are receipted (the helper waits for each RECEIPT), no data
    directory is made, and /stats has no disk alarm.
    """
    for attempt in range(4):
        publish(
            supervisor.address,
            "/queue/workers.disk",
            [f"m{attempt}-{n}" for n in range(20)],
            persistent="true",
        )
    assert not (supervisor.workdir / "data").exists()
    url = f"http://127.0.0.1:{supervisor.http_port}/stats"
    with urllib.request.urlopen(url, timeout=WAIT) as response:
        assert json.load(response)["disk"]["enabled"] is False


def test_workers_that_cannot_start_stop_the_supervisor(tmp_path: Path) -> None:
    """With a Redis nobody serves the workers cannot start: the supervisor exits 1, saying so."""
    result = run_broker_to_its_end(
        tmp_path, "--engine", f"redis://127.0.0.1:{free_port()}/0", "--workers", "2"
    )
    assert result.returncode == 1, result.stdout
    assert "cannot reach Redis" in result.stdout
    assert "ended" in result.stdout and "after it started" in result.stdout


def test_a_session_resumes_on_whichever_worker_takes_the_reconnection(
    supervisor: BrokerProcess,
) -> None:
    """
    The kernel hands a reconnection to either worker: the session resumes with
    every message it missed either way, until one resume crossed workers (bounded).
    """
    crossed = 0
    for attempt in range(20):
        topic = f"/topic/workers.resume.{attempt}"
        first, inbox = subscribed(supervisor, topic, "t")
        cut(first)
        publish(supervisor.address, topic, [f"m{n}" for n in range(10)])
        again, back = resumable(supervisor, inbox.connected["resume-token"])
        try:
            assert back.connected["resumed"] == "true", back.connected
            assert back.wait_for(lambda back=back: len(back.messages) == 10)
            assert back.bodies() == [f"m{n}".encode() for n in range(10)]
        finally:
            again.disconnect()
        node_of = {s.connected["session"].split("-")[1] for s in (inbox, back)}
        crossed += len(node_of) == 2
        if crossed:
            break
    assert crossed
