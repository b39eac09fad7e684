"""
Streams through the real broker (``twistd -n stompbroker``, memory engine with
its SQLite store) and ``stomp.py`` clients: replay from each kind of start then
the live tail, several readers at their own pace, client acknowledgement with a
small window, the ERRORs of a bad subscription, the redis engine's refusal, and
offsets that keep growing, messages kept, across a SIGKILL.
"""

from __future__ import annotations

import json
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from benchmarks.launcher import LOOPBACK_HTTP
from tests.support.clients import Collector, connect, publish, through
from tests.support.process import BrokerProcess, BrokerStarter, module_broker
from tests.support.redis import RedisServer, node, redis_server  # noqa: F401

broker = module_broker("streams")

OFFSET = "x-stream-offset"


def offsets(inbox: Collector) -> list[int]:
    return [int(frame.headers[OFFSET]) for frame in inbox.messages]


def stream_name(request: pytest.FixtureRequest) -> str:
    return f"/stream/{request.node.name.replace('[', '.').replace(']', '')}"


def subscribe(
    address: tuple[str, int], destination: str, start: str | None, **headers: str
) -> tuple[Any, Collector]:
    connection, inbox = connect(address)
    if start is not None:
        headers[OFFSET] = start
    ack = headers.pop("ack", "auto")
    connection.subscribe(destination, id="s", ack=ack, receipt="subscribed", headers=headers)
    assert inbox.wait_for(lambda: "subscribed" in inbox.receipts or bool(inbox.errors))
    return connection, inbox


def read_acking(connection: Any, inbox: Collector, bodies: list[bytes], window: int) -> None:
    """ACK what arrives, checking that no more than ``window`` is ever held, until
    ``bodies`` have arrived; they must be exactly those, in order, offsets growing."""
    acked = 0
    deadline = time.monotonic() + 20
    while len(inbox.messages) < len(bodies) and time.monotonic() < deadline:
        assert inbox.wait_for(lambda acked=acked: len(inbox.messages) > acked, 5), acked
        held = len(inbox.messages)
        assert held - acked <= window
        for frame in inbox.messages[acked:held]:
            connection.ack(frame.headers["ack"])
        acked = held
    assert inbox.bodies() == bodies
    assert offsets(inbox) == sorted(set(offsets(inbox)))
    connection.disconnect()


@pytest.mark.parametrize(
    ("start", "expected"),
    [
        ("first", [b"0", b"1", b"2", b"3", b"live"]),
        ("last", [b"3", b"live"]),
        ("next", [b"live"]),
        (None, [b"live"]),
        ("offset=2", [b"2", b"3", b"live"]),
    ],
)
def test_a_subscription_replays_from_its_start_then_gets_the_live_tail(
    broker: BrokerProcess, request: pytest.FixtureRequest, start: str | None, expected: list[bytes]
) -> None:
    """Each x-stream-offset replays what it names, then live messages follow, none twice."""
    destination = stream_name(request)
    publish(broker.address, destination, [b"0", b"1", b"2", b"3"])
    connection, inbox = subscribe(broker.address, destination, start)
    publish(broker.address, destination, [b"live"])
    through(inbox, (broker.address, destination))
    assert inbox.bodies() == expected
    assert offsets(inbox) == sorted(set(offsets(inbox)))
    connection.disconnect()


def test_timestamp_start_replays_what_was_published_since(
    broker: BrokerProcess, request: pytest.FixtureRequest
) -> None:
    """timestamp=SECONDS replays the messages published at or after that time."""
    destination = stream_name(request)
    publish(broker.address, destination, [b"old"])
    time.sleep(1.1)
    since = int(time.time())
    time.sleep(0.1)
    publish(broker.address, destination, [b"new"])
    connection, inbox = subscribe(broker.address, destination, f"timestamp={since}")
    assert inbox.wait_for(lambda: inbox.bodies() == [b"new"])
    connection.disconnect()


def test_client_ack_readers_with_a_small_window_read_everything_at_their_own_pace(
    broker: BrokerProcess, request: pytest.FixtureRequest
) -> None:
    """Two client-ack readers with prefetch 5 each get all 200 messages once, in offset order."""
    destination = stream_name(request)
    bodies = [str(number).encode() for number in range(200)]
    publish(broker.address, destination, bodies[:100])
    readers = [
        subscribe(
            broker.address, destination, "first", ack="client-individual", **{"prefetch-count": "5"}
        )
        for _ in range(2)
    ]
    publish(broker.address, destination, bodies[100:])
    for connection, inbox in readers:
        read_acking(connection, inbox, bodies, window=5)


@pytest.mark.parametrize(
    ("destination", "headers", "error"),
    [
        ("/stream/a.*", {}, "wildcard in stream destination"),
        ("/stream/a.#", {}, "wildcard in stream destination"),
        ("/stream/ok", {OFFSET: "offset=-3"}, "invalid x-stream-offset header"),
        ("/stream/ok", {OFFSET: "yesterday"}, "invalid x-stream-offset header"),
        ("/stream/ok", {"selector": "a = 1"}, "selector on a stream"),
    ],
)
def test_a_bad_stream_subscription_gets_a_clear_error(
    broker: BrokerProcess, destination: str, headers: dict[str, str], error: str
) -> None:
    """A wildcard, a bad x-stream-offset or a selector is refused with an ERROR saying which."""
    connection, inbox = connect(broker.address)
    connection.subscribe(destination, id="s", receipt="subscribed", headers=headers)
    assert inbox.wait_for(lambda: bool(inbox.errors))
    assert inbox.errors[0].headers["message"] == error
    assert "subscribed" not in inbox.receipts


def test_offsets_keep_growing_and_messages_survive_a_sigkill(
    tmp_path: Path, start: BrokerStarter
) -> None:
    """After SIGKILL and a restart on the same data directory, the stream replays what was
    receipted and new messages take higher offsets."""
    data = tmp_path / "data"
    first = start(data)
    publish(first.address, "/stream/kept", [b"a", b"b", b"c"])
    first.kill()
    second = start(data)
    try:
        publish(second.address, "/stream/kept", [b"d"])
        connection, inbox = subscribe(second.address, "/stream/kept", "first")
        assert inbox.wait_for(lambda: len(inbox.messages) == 4)
        assert inbox.bodies() == [b"a", b"b", b"c", b"d"]
        assert offsets(inbox) == [0, 1, 2, 3]
        connection.disconnect()
    finally:
        second.stop()


def get_json(broker: BrokerProcess, path: str) -> Any:
    """:returns: the JSON answer of the broker's web port at ``path``."""
    url = f"http://127.0.0.1:{broker.http_port}{path}"
    with urllib.request.urlopen(url, timeout=10) as page:
        return json.load(page)


def test_stats_and_the_api_count_a_streams_appends_reads_and_retained_range(
    tmp_path: Path,
) -> None:
    """
    stomp.py appends 40 messages to a stream and a reader reads them all: /stats counts 40 in and
    40 delivered with their bytes and the range kept, /api/destinations the same with rates above
    zero over the latest interval.
    """
    bodies = [f"entry-{number:02d}".encode() for number in range(40)]
    with BrokerProcess(tmp_path, "--monitor-interval", "0.5") as process:
        publish(process.address, "/stream/audit", bodies[:30])
        connection, inbox = subscribe(process.address, "/stream/audit", "first")
        publish(process.address, "/stream/audit", bodies[30:])
        assert inbox.wait_for(lambda: len(inbox.messages) == 40)
        assert inbox.bodies() == bodies
        size = sum(len(body) for body in bodies)

        def counted() -> Any:
            rows = get_json(process, "/api/destinations")
            [row] = [row for row in rows if row["destination"] == "/stream/audit"]
            return row if row["messages_delivered_per_second"] > 0 else None

        deadline = time.monotonic() + 20
        row = counted()
        while row is None and time.monotonic() < deadline:
            time.sleep(0.2)
            row = counted()
        assert row is not None
        assert row["messages_in_per_second"] > 0
        kept = row["stream"]
        assert (kept["first_offset"], kept["last_offset"], kept["messages"]) == (0, 39, 40)
        assert kept["bytes"] > size
        audit = get_json(process, "/stats")["destinations"]["/stream/audit"]
        assert (audit["messages_in"], audit["bytes_in"]) == (40, size)
        assert (audit["messages_delivered"], audit["bytes_out"]) == (40, size)
        assert (audit["consumers"], audit["stream"]) == (1, kept)
        detail = get_json(process, "/api/destinations/%2Fstream%2Faudit")
        assert detail["stream"] == kept
        connection.disconnect()


def test_a_stream_published_on_one_redis_node_is_replayed_and_followed_on_another(
    redis_server: RedisServer,  # noqa: F811
    tmp_path: Path,
) -> None:
    """With --engine redis, node B replays from first what node A appended, then gets A's
    live messages, none twice, offsets growing; `next` on B gets only the live ones."""
    with node(tmp_path / "a", redis_server) as node_a, node(tmp_path / "b", redis_server) as node_b:
        publish(node_a.address, "/stream/shared", [b"0", b"1", b"2"])
        replaying, replayed = subscribe(node_b.address, "/stream/shared", "first")
        following, followed = subscribe(node_b.address, "/stream/shared", "next")
        assert replayed.wait_for(lambda: len(replayed.messages) == 3)
        publish(node_a.address, "/stream/shared", [b"3", b"4"])
        publish(node_b.address, "/stream/shared", [b"5"])
        through(replayed, (node_b.address, "/stream/shared"))
        through(followed, (node_b.address, "/stream/shared"))
        assert replayed.bodies() == [b"0", b"1", b"2", b"3", b"4", b"5"]
        assert followed.bodies() == [b"3", b"4", b"5"]
        assert offsets(replayed) == sorted(set(offsets(replayed)))
        assert offsets(followed) == offsets(replayed)[3:]
        middle = offsets(replayed)[2]
        again, inbox = subscribe(node_a.address, "/stream/shared", f"offset={middle}")
        assert inbox.wait_for(lambda: len(inbox.messages) == 4)
        assert inbox.bodies() == [b"2", b"3", b"4", b"5"]
        for connection in (replaying, following, again):
            connection.disconnect()


def test_each_redis_node_counts_what_it_appended_and_delivered_and_stats_add_them_up(
    redis_server: RedisServer,  # noqa: F811
    tmp_path: Path,
) -> None:
    """
    Node A appends 10 to a stream and node B's reader gets them: each node counts its own (A's
    appends, B's deliveries), and /stats on either node shows the cluster's 10 in, 10 delivered,
    and the range the server keeps, once (not once per node), as /api/destinations on B (whose
    reader made the stream known there) does.
    """
    bodies = [str(number).encode() for number in range(10)]
    with (
        node(tmp_path / "a", redis_server, http=LOOPBACK_HTTP) as node_a,
        node(tmp_path / "b", redis_server, http=LOOPBACK_HTTP) as node_b,
    ):
        connection, inbox = subscribe(node_b.address, "/stream/counted", "first")
        publish(node_a.address, "/stream/counted", bodies)
        assert inbox.wait_for(lambda: inbox.bodies() == bodies)
        for process in (node_a, node_b):
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline:
                stats = get_json(process, "/stats")
                counted = stats["destinations"].get("/stream/counted", {})
                if counted.get("messages_delivered") == 10 and counted.get("stream"):
                    break
                time.sleep(0.2)
            assert (counted["messages_in"], counted["messages_delivered"]) == (10, 10)
            assert (counted["bytes_in"], counted["bytes_out"], counted["consumers"]) == (10, 10, 1)
            kept = counted["stream"]
            assert (kept["messages"], kept["bytes"] > 10) == (10, True)
            assert kept["first_offset"] < kept["last_offset"]
        [row] = [
            row
            for row in get_json(node_b, "/api/destinations")
            if row["destination"] == "/stream/counted"
        ]
        assert (row["depth"], row["stream"]) == (10, kept)
        [a_node] = [figures for figures in get_json(node_a, "/stats")["nodes"] if figures["here"]]
        assert (a_node["messages_in"], a_node["messages_delivered"]) == (10, 0)
        [b_node] = [figures for figures in get_json(node_b, "/stats")["nodes"] if figures["here"]]
        assert (b_node["messages_in"], b_node["messages_delivered"]) == (0, 10)
        connection.disconnect()


def test_a_client_ack_reader_on_a_redis_node_reads_in_windows(
    redis_server: RedisServer,  # noqa: F811
    tmp_path: Path,
) -> None:
    """On node B, a client-ack reader with prefetch 5 gets all 300 messages node A appended
    before and while it reads, once each, in order, never holding more than 5."""
    bodies = [str(number).encode() for number in range(300)]
    with node(tmp_path / "a", redis_server) as node_a, node(tmp_path / "b", redis_server) as node_b:
        publish(node_a.address, "/stream/windowed", bodies[:150])
        connection, inbox = subscribe(
            node_b.address,
            "/stream/windowed",
            "first",
            ack="client-individual",
            **{"prefetch-count": "5"},
        )
        publish(node_a.address, "/stream/windowed", bodies[150:])
        read_acking(connection, inbox, bodies, window=5)


def test_a_redis_stream_outlives_its_nodes_and_its_offsets_keep_growing(
    redis_server: RedisServer,  # noqa: F811
    tmp_path: Path,
) -> None:
    """After the node that appended is SIGKILLed, a new node replays the stream from Redis,
    and what it appends takes higher offsets."""
    node_a = node(tmp_path / "a", redis_server)
    try:
        publish(node_a.address, "/stream/lasting", [b"a", b"b"])
    finally:
        node_a.kill()
    with node(tmp_path / "c", redis_server) as node_c:
        publish(node_c.address, "/stream/lasting", [b"c"])
        connection, inbox = subscribe(node_c.address, "/stream/lasting", "first")
        assert inbox.wait_for(lambda: len(inbox.messages) == 3)
        assert inbox.bodies() == [b"a", b"b", b"c"]
        assert offsets(inbox) == sorted(set(offsets(inbox)))
        connection.disconnect()
