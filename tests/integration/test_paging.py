"""
Paged queues on the real broker: a backlog many times ``--queue-memory``, sent by
``stomp.py`` with a receipt each, survives a SIGKILL and drains exactly once, in
order; a non-persistent one pages out too, and a restart drops it.
"""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

from stompbroker.broker.store.sqlite import DATABASE_NAME
from tests.support.clients import connect, flush_deliveries, publish
from tests.support.policy_calls import eventually
from tests.support.process import BrokerStarter

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
