"""
The statistics export end to end: the real broker (``twistd``) with ``--stats-dir``,
known traffic from ``stomp.py``, SIGTERM, then the batch report
(``sparkjobs.report``) on a real local SparkSession, whose totals must equal the
traffic that was sent.
"""

from __future__ import annotations

import contextlib
import io
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from sparkjobs import report
from stompbroker.stats.schema import (
    FILE_GLOB,
    FLOW_COUNTERS,
    BrokerRecord,
    DestinationRecord,
    record_from_json_line,
)
from tests.support.clients import connect
from tests.support.process import BrokerProcess

ORDERS, PRICES, AUDIT = "/queue/orders", "/topic/prices.eur", "/queue/audit"
#: Messages and body size sent to each destination.
SENT = {ORDERS: (30, 100), PRICES: (20, 10), AUDIT: (7, 1000)}
#: Subscriptions each destination's messages reach.
REACH = {ORDERS: 1, PRICES: 2, AUDIT: 0}
WAIT = 10.0


def expected_totals() -> dict[str, dict[str, int]]:
    """What the report must find for each destination: every other flow counter is 0."""
    totals = {}
    for destination, (count, size) in SENT.items():
        delivered = count * REACH[destination]
        totals[destination] = {name: 0 for name in FLOW_COUNTERS} | {
            "messages_in": count,
            "bytes_in": count * size,
            "messages_delivered": delivered,
            "messages_acked": delivered,
            "bytes_out": delivered * size,
        }
    return totals


def drive_traffic(address: tuple[str, int]) -> int:
    """
    Send the known traffic and see it consumed: two auto subscribers on the topic, a
    client-individual consumer that acknowledges every order, and nobody on the audit queue.

    :returns: how many client connections were made.
    """
    watchers = [connect(address) for _ in range(2)]
    worker, inbox = connect(address)
    producer, confirmations = connect(address)
    try:
        for number, (connection, seen) in enumerate(watchers):
            connection.subscribe(PRICES, id=str(number), receipt="watching")
            assert seen.wait_for(lambda seen=seen: "watching" in seen.receipts)
        worker.subscribe(ORDERS, id="w", ack="client-individual", receipt="working")
        assert inbox.wait_for(lambda: "working" in inbox.receipts)
        for destination, (count, size) in SENT.items():
            for number in range(count):
                receipt = {"receipt": destination} if number == count - 1 else {}
                producer.send(destination, b"x" * size, headers=receipt)
        assert confirmations.wait_for(lambda: len(confirmations.receipts) == len(SENT), WAIT)
        for _, seen in watchers:
            assert seen.wait_for(lambda seen=seen: len(seen.messages) == SENT[PRICES][0], WAIT)
        assert inbox.wait_for(lambda: len(inbox.messages) == SENT[ORDERS][0], WAIT)
        *earlier, last = inbox.messages
        for message in earlier:
            worker.ack(message.headers["ack"])
        worker.ack(last.headers["ack"], receipt="acked")
        assert inbox.wait_for(lambda: "acked" in inbox.receipts, WAIT)
    finally:
        clients = [(worker, inbox), (producer, confirmations), *watchers]
        for connection, _ in clients:
            connection.disconnect()
        for _, seen in clients:
            assert seen.wait_for(lambda seen=seen: seen.disconnected, WAIT)
    return len(clients)


def read_records(directory: Path) -> list[Any]:
    return [
        record_from_json_line(line)
        for path in sorted(directory.glob(FILE_GLOB))
        for line in path.read_text().splitlines()
    ]


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, int]:
    """
    The stats directory of a broker that carried the known traffic and was stopped with SIGTERM.
    """
    workdir = tmp_path_factory.mktemp("stats-e2e")
    stats = workdir / "stats"
    options = ("--data-dir", "none", "--stats-dir", str(stats), "--stats-interval", "0.5")
    with BrokerProcess(workdir, *options, http=None) as broker:
        connections = drive_traffic(broker.address)
    assert "Server Shut Down" in broker.log()
    return stats, connections


def test_sigterm_publishes_the_last_file_and_the_records_add_up(
    exported: tuple[Path, int],
) -> None:
    """
    A broker stopped with SIGTERM leaves only published files, whose records add up to the traffic.
    """
    stats, _ = exported
    assert sorted(path.name for path in stats.iterdir() if path.name.startswith(".")) == []
    totals: dict[str, Counter[str]] = {}
    for found in read_records(stats):
        if isinstance(found, DestinationRecord) and found.destination in SENT:
            counter = totals.setdefault(found.destination, Counter())
            for name in FLOW_COUNTERS:
                counter[name] += getattr(found, name)
    assert {name: dict(counter) for name, counter in totals.items()} == expected_totals()


def test_the_spark_report_totals_equal_the_traffic_sent(
    exported: tuple[Path, int],
    spark: SparkSession,
    tmp_path: Path,
) -> None:
    """
    sparkjobs.report, on a local SparkSession, finds exactly the messages and bytes that were sent.
    """
    stats, connections = exported
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        status = report.main(["--input", str(stats), "--output", str(tmp_path / "report")])
    assert status == 0
    assert ", 0 bad," in printed.getvalue()
    summary = spark.read.parquet(str(tmp_path / "report" / "destination_summary"))
    found = {
        row.destination: {name: row[name] for name in FLOW_COUNTERS}
        for row in summary.collect()
        if row.destination in SENT
    }
    assert found == expected_totals()
    audit = summary.filter(summary.destination == AUDIT).first()
    assert audit is not None and audit.depth_peak == SENT[AUDIT][0]
    (headline,) = spark.read.parquet(str(tmp_path / "report" / "summary")).collect()
    sent = sum(count for count, _ in SENT.values())
    assert headline.messages_in == sent
    assert headline.connections_opened == headline.connections_closed >= connections
    brokers = [r for r in read_records(stats) if isinstance(r, BrokerRecord)]
    assert sum(r.connections_opened for r in brokers) == headline.connections_opened
    assert (tmp_path / "report" / "dashboard.html").is_file()
