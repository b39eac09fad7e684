"""
Persistent messages on the real broker (``twistd -n stompbroker --data-dir ...``),
driven by ``stomp.py``: what survives a restart and a SIGKILL, and how twistd
refuses a data directory it cannot use.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.support.clients import Collector, connect, drain, flush_deliveries, publish
from tests.support.process import BrokerProcess, BrokerStarter, run_broker_to_its_end
from tests.support.store import FILLING, damage_pages, write_garbage

PERSISTENT = {"persistent": "true"}


def test_persistent_messages_survive_a_restart_and_others_do_not(
    tmp_path: Path, start: BrokerStarter
) -> None:
    """
    Issue 5: persistent:true messages come back, in order, after the broker restarts;
    the others lived in memory only.
    """
    data = tmp_path / "data"
    broker = start(data)
    publish(broker.address, "/queue/orders", ["1", "2", "3"], **PERSISTENT)
    publish(broker.address, "/queue/orders", ["memory only"])
    broker.stop()
    broker = start(data)
    try:
        messages = drain(broker, "/queue/orders", 3)
        assert [m.body for m in messages] == [b"1", b"2", b"3"]
        assert all("redelivered" not in m.headers for m in messages)
    finally:
        broker.stop()


def test_delivered_unacknowledged_messages_come_back_redelivered_after_sigkill(
    tmp_path: Path, start: BrokerStarter
) -> None:
    """
    Issue 5: after SIGKILL, a message delivered but not acknowledged returns with
    redelivered:true; an acknowledged one never returns.
    """
    data = tmp_path / "data"
    broker = start(data)
    publish(broker.address, "/queue/jobs", ["acked", "held", "waiting"], **PERSISTENT)
    connection, collector = connect(broker.address)
    connection.subscribe(
        "/queue/jobs", id="s", ack="client-individual", headers={"prefetch-count": "2"}
    )
    assert collector.wait_for(lambda: len(collector.messages) == 2)
    connection.ack(collector.messages[0].headers["ack"], receipt="acked")
    assert collector.wait_for(lambda: "acked" in collector.receipts)
    broker.kill()
    broker = start(data)
    try:
        messages = drain(broker, "/queue/jobs", 2)
        assert [(m.body, m.headers.get("redelivered")) for m in messages] == [
            (b"held", "true"),
            (b"waiting", "true"),
        ]
    finally:
        broker.stop()


def test_persistent_queues_option_keeps_every_queue_message(
    tmp_path: Path, start: BrokerStarter
) -> None:
    """--persistent-queues stores queue messages that carry no persistent header."""
    data = tmp_path / "data"
    broker = start(data, "--persistent-queues", "--sync", "always")
    publish(broker.address, "/queue/plain", ["kept"])
    broker.kill()
    broker = start(data, "--persistent-queues")
    try:
        assert [m.body for m in drain(broker, "/queue/plain", 1)] == [b"kept"]
    finally:
        broker.stop()


def test_durable_subscription_and_its_backlog_survive_sigkill(
    tmp_path: Path, start: BrokerStarter
) -> None:
    """Issue 5: a durable topic subscription is rebuilt with the persistent messages it has."""
    data = tmp_path / "data"
    durable = {"activemq.subscriptionName": "audit"}
    broker = start(data)
    connection, collector = _client_with_id(broker)
    connection.subscribe("/topic/events.*", id="d", ack="client", headers=durable)
    connection.disconnect(receipt="bye")
    publish(broker.address, "/topic/events.login", ["kept"], **PERSISTENT)
    publish(broker.address, "/topic/events.login", ["not kept"])
    broker.kill()
    broker = start(data)
    try:
        connection, collector = _client_with_id(broker)
        connection.subscribe("/topic/events.*", id="d", ack="client", headers=durable)
        assert collector.wait_for(lambda: collector.messages)
        flush_deliveries(connection, collector)
        assert collector.bodies() == [b"kept"]
        connection.disconnect()
    finally:
        broker.stop()


def start_refused(workdir: Path, data: Path, *phrases: str) -> int:
    """
    Run twistd on ``data``, a start that must fail, saying each of ``phrases`` once.

    :returns: twistd's exit status.
    """
    finished = run_broker_to_its_end(workdir, "--data-dir", str(data))
    assert finished.returncode != 0, finished.stdout
    for phrase in phrases:
        assert finished.stdout.count(phrase) == 1, finished.stdout
    return finished.returncode


def _client_with_id(broker: BrokerProcess) -> tuple[Any, Collector]:
    return connect(broker.address, headers={"client-id": "auditor"})


def test_a_damaged_data_directory_stops_twistd_with_a_clear_message(tmp_path: Path) -> None:
    """Issue 5: a file that is not a store ends the start with an error, never an empty broker."""
    data = tmp_path / "data"
    write_garbage(data)
    start_refused(tmp_path, data, "is not a readable stompbroker store", "restore it from a backup")


def test_a_store_whose_pages_are_damaged_stops_twistd_after_reading_them(
    tmp_path: Path, start: BrokerStarter
) -> None:
    """Damage found only while recovering ends twistd too, with status 1 and the store's advice."""
    data = tmp_path / "data"
    broker = start(data)
    count, size = FILLING
    publish(broker.address, "/queue/big", ["x" * size] * count, **PERSISTENT)
    broker.stop()
    damage_pages(data)
    advice = ("stompbroker cannot start", "restore it from a backup")
    assert start_refused(tmp_path, data, *advice) == 1


def test_a_locked_data_directory_stops_a_second_broker(
    tmp_path: Path, start: BrokerStarter
) -> None:
    """Issue 5: two brokers never share a data directory; the second says which process holds it."""
    data = tmp_path / "data"
    broker = start(data)
    try:
        start_refused(tmp_path, data, "is in use by another broker", f"process {broker.pid}")
    finally:
        broker.stop()
