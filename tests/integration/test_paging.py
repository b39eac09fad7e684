"""
Paged queues on the real broker: a backlog many times ``--queue-memory``, sent by
``stomp.py`` with a receipt each, survives a SIGKILL and drains exactly once, in
order; a non-persistent one pages out too, and a restart drops it.
"""

from __future__ import annotations

import base64
import json
import sqlite3
import threading
import time
import urllib.request
from contextlib import closing
from pathlib import Path
from typing import Any
from urllib.parse import quote

from stompbroker.broker.store.sqlite import DATABASE_NAME
from tests.support.clients import connect, flush_deliveries, publish
from tests.support.management import ADMIN, managed_broker
from tests.support.policy_calls import eventually
from tests.support.process import BrokerProcess, BrokerStarter

PERSISTENT = {"persistent": "true"}
#: Far more than the budget holds: ~600 bytes of bookkeeping and 1 KiB per message.
BACKLOG = 3000
BODY = "x" * 1000


def test_a_paged_backlog_survives_sigkill_and_drains_once_in_order(
    tmp_path: Path, start: BrokerStarter
) -> None:
    """Issue 42: past the budget the store holds the backlog; a restart reads an index of it."""
    data = tmp_path / "data"
    paging = ("--queue-memory", "64K", "--read-ahead", "50")
    broker = start(data, *paging)
    bodies = [f"{n:05d} {BODY}" for n in range(BACKLOG)]
    publish(broker.address, "/queue/backlog", bodies, **PERSISTENT)
    broker.kill()
    first_log = broker.log_path.read_text(encoding="utf-8", errors="replace")
    assert "queue /queue/backlog pages" in first_log
    broker = start(data, *paging)
    try:
        got = drain_in_order(broker.address, BACKLOG)
        assert [m.body.decode()[:5] for m in got] == [f"{n:05d}" for n in range(BACKLOG)]
        assert all("redelivered" not in m.headers for m in got)
        log = broker.log_path.read_text(encoding="utf-8", errors="replace")
        # Recovery counted the backlog, and read only the head of it.
        assert f"recovered {BACKLOG} persistent messages" in log
    finally:
        broker.stop()


def transient_rows(data: Path) -> int:
    """:returns: the transient rows the store holds now (a WAL reader: safe while it runs)."""
    with closing(sqlite3.connect(f"file:{data / DATABASE_NAME}?mode=ro", uri=True)) as database:
        (count,) = database.execute("SELECT count(*) FROM messages WHERE transient").fetchone()
    return int(count)


def drain_in_order(address: tuple[str, int], count: int) -> list[Any]:
    """:returns: ``count`` messages taken with client-individual ACKs, each acknowledged."""
    connection, collector = connect(address)
    connection.subscribe(
        "/queue/backlog", id="s", ack="client-individual", headers={"prefetch-count": "20"}
    )
    acked = 0
    while acked < count:
        seen = acked
        assert collector.wait_for(lambda seen=seen: len(collector.messages) > seen), seen
        for message in collector.messages[acked:]:
            connection.ack(message.headers["ack"])
            acked += 1
    flush_deliveries(connection, collector)
    connection.disconnect(receipt="bye")
    return list(collector.messages)


def test_a_non_persistent_backlog_pages_out_and_drains_once_in_order(
    tmp_path: Path, start: BrokerStarter
) -> None:
    """
    Issue 42: non-persistent messages far beyond --queue-memory go to disk as
    transient rows instead of holding the producer (every receipt comes, and the
    memory alarm never starts); they drain exactly once, in order, and leave the
    store as they are read back.
    """
    data = tmp_path / "data"
    broker = start(data, "--queue-memory", "64K", "--read-ahead", "50")
    try:
        bodies = [f"{n:05d} {BODY}" for n in range(BACKLOG)]
        publish(broker.address, "/queue/backlog", bodies)
        # The receipts came at once: the rows follow with the next commits.
        eventually(lambda: transient_rows(data) >= BACKLOG - 50)
        got = drain_in_order(broker.address, BACKLOG)
        assert [m.body.decode()[:5] for m in got] == [f"{n:05d}" for n in range(BACKLOG)]
        assert all("redelivered" not in m.headers for m in got)
        assert transient_rows(data) == 0
        log = broker.log_path.read_text(encoding="utf-8", errors="replace")
        assert "queue /queue/backlog pages" in log
        assert "over the high mark" not in log
    finally:
        broker.stop()


def test_a_restart_drops_paged_non_persistent_messages_and_keeps_the_persistent(
    tmp_path: Path, start: BrokerStarter
) -> None:
    """
    A non-persistent message does not survive a restart, paged or not: the stop
    says how many it loses, and the next start drains the persistent ones alone,
    in order; no transient row is left.
    """
    data = tmp_path / "data"
    paging = ("--queue-memory", "64K", "--read-ahead", "50")
    broker = start(data, *paging)
    connection, events = connect(broker.address)
    for n in range(BACKLOG):
        headers = PERSISTENT if n % 3 == 0 else {}
        connection.send("/queue/backlog", f"{n:05d} {BODY}", headers=headers, receipt=f"r-{n}")
    assert events.wait_for(lambda: len(events.receipts) == BACKLOG), len(events.receipts)
    connection.disconnect()
    assert transient_rows(data) > 0
    broker.stop()
    kept = [f"{n:05d}" for n in range(0, BACKLOG, 3)]
    dropped = BACKLOG - len(kept)
    stopped_log = broker.log_path.read_text(encoding="utf-8", errors="replace")
    assert f"dropped {dropped} non-persistent messages waiting in /queue/backlog" in stopped_log
    broker = start(data, *paging)
    try:
        assert transient_rows(data) == 0
        got = drain_in_order(broker.address, len(kept))
        assert [m.body.decode()[:5] for m in got] == kept
        assert all(m.headers.get("persistent") == "true" for m in got)
    finally:
        broker.stop()


def stats_depth(broker: BrokerProcess, destination: str) -> int:
    """:returns: the depth ``/stats`` gives for a destination (0 for one it does not list)."""
    url = f"http://127.0.0.1:{broker.http_port}/stats"
    with urllib.request.urlopen(url, timeout=5) as response:
        stats = json.load(response)
    return int(stats["destinations"].get(destination, {"depth": 0})["depth"])


def test_paged_messages_expire_on_disk_without_a_consumer(tmp_path: Path) -> None:
    """Issue 42: the sweep of the store drops expired paged messages; /stats' depth follows."""
    with BrokerProcess(
        tmp_path / "broker",
        *("--data-dir", str(tmp_path / "data"), "--queue-memory", "64K", "--read-ahead", "50"),
    ) as broker:
        kept = [f"kept {n:04d} {BODY}" for n in range(300)]
        publish(broker.address, "/queue/expiring", kept, **PERSISTENT)
        expires = str(int((time.time() + 2) * 1000))
        short = [f"short {n:04d} {BODY}" for n in range(400)]
        publish(broker.address, "/queue/expiring", short, expires=expires, **PERSISTENT)
        assert stats_depth(broker, "/queue/expiring") == 700
        deadline = time.monotonic() + 15
        while stats_depth(broker, "/queue/expiring") != 300:
            assert time.monotonic() < deadline, stats_depth(broker, "/queue/expiring")
            time.sleep(0.2)
        connection, collector = connect(broker.address)
        connection.subscribe("/queue/expiring", id="s", ack="auto")
        assert collector.wait_for(lambda: len(collector.messages) >= 300)
        flush_deliveries(connection, collector)
        assert [m.body.decode()[:9] for m in collector.messages] == [b[:9] for b in kept]
        connection.disconnect()


def api_move(broker: BrokerProcess, source: str, to: str, timeout: float = 60) -> Any:
    """POST a move of everything waiting in ``source``; :returns: the JSON answer."""
    request = urllib.request.Request(
        f"http://127.0.0.1:{broker.http_port}/api/destinations/{quote(source, safe='')}/move",
        data=json.dumps({"to": to}).encode(),
        headers={
            "Content-Type": "application/json",
            "Authorization": "Basic " + base64.b64encode(":".join(ADMIN).encode()).decode(),
        },
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=timeout) as response:
        return json.load(response)


def drain(broker: BrokerProcess, destination: str) -> list[str]:
    """:returns: the bodies of every message waiting in ``destination``, taken in order."""
    waiting = stats_depth(broker, destination)
    connection, collector = connect(broker.address)
    connection.subscribe(destination, id="s", ack="auto")
    assert collector.wait_for(lambda: len(collector.messages) >= waiting, 60), waiting
    flush_deliveries(connection, collector)
    connection.disconnect()
    return [m.body.decode() for m in collector.messages]


def test_a_move_takes_a_whole_paged_queue_and_a_sigkill_in_it_loses_nothing(
    tmp_path: Path,
) -> None:
    """
    Issue 42: one move takes every message of a queue paged far past its
    read-ahead, in order; killed in the middle of a move back, the broker comes
    back with each message in exactly one of the two queues, each in order.
    """
    count = 8000
    bodies = [f"{n:05d}" for n in range(count)]
    data = str(tmp_path / "data")
    paging = ("--data-dir", data, "--queue-memory", "16K", "--read-ahead", "100")
    for start in ("first", "second"):
        (tmp_path / start).mkdir()
    broker = managed_broker(tmp_path / "first", *paging)
    try:
        publish(broker.address, "/queue/from", bodies, **PERSISTENT)
        assert api_move(broker, "/queue/from", "/queue/to")["moved"] == count
        assert stats_depth(broker, "/queue/to") == count
        mover = threading.Thread(target=lambda: _moved_or_cut(broker))
        mover.start()
        deadline = time.monotonic() + 30
        while stats_depth(broker, "/queue/from") == 0 and time.monotonic() < deadline:
            time.sleep(0.005)
        # In the middle of the move (unless it was quicker than the poll).
        broker.kill()
        mover.join()
    finally:
        broker.stop()
    broker = managed_broker(tmp_path / "second", *paging)
    try:
        moved_back, stayed = drain(broker, "/queue/from"), drain(broker, "/queue/to")
    finally:
        broker.stop()
    assert sorted(moved_back + stayed) == bodies
    assert moved_back == sorted(moved_back) and stayed == sorted(stayed)


def _moved_or_cut(broker: BrokerProcess) -> None:
    """Move everything back, until the broker is killed under the call."""
    try:
        api_move(broker, "/queue/to", "/queue/from")
    except OSError:
        pass
