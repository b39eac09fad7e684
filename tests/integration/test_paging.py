"""
Paged queues on the real broker: a backlog many times ``--queue-memory``, sent by
``stomp.py`` with a receipt each, survives a SIGKILL and drains exactly once, in order.
"""

from __future__ import annotations

import json
import time
import urllib.request
from pathlib import Path

from tests.support.clients import connect, flush_deliveries, publish
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
        connection, collector = connect(broker.address)
        connection.subscribe(
            "/queue/backlog",
            id="s",
            ack="client-individual",
            headers={"prefetch-count": "20"},
        )
        acked = 0
        while acked < BACKLOG:
            seen = acked
            assert collector.wait_for(lambda seen=seen: len(collector.messages) > seen), seen
            for message in collector.messages[acked:]:
                connection.ack(message.headers["ack"])
                acked += 1
        flush_deliveries(connection, collector)
        got = [m.body.decode()[:5] for m in collector.messages]
        assert got == [f"{n:05d}" for n in range(BACKLOG)]
        assert all("redelivered" not in m.headers for m in collector.messages)
        connection.disconnect(receipt="bye")
        log = broker.log_path.read_text(encoding="utf-8", errors="replace")
        # Recovery counted the backlog, and read only the head of it.
        assert f"recovered {BACKLOG} persistent messages" in log
    finally:
        broker.stop()


def stats_depth(broker: BrokerProcess, destination: str) -> int:
    """:returns: the depth ``/stats`` gives for a destination."""
    url = f"http://127.0.0.1:{broker.http_port}/stats"
    with urllib.request.urlopen(url, timeout=5) as response:
        stats = json.load(response)
    return int(stats["destinations"][destination]["depth"])


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
