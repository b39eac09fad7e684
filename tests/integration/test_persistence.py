"""
Persistent messages on the real broker (``twistd -n stompbroker --data-dir ...``),
driven by ``stomp.py``: what survives a restart and a SIGKILL, and how twistd
refuses a data directory it cannot use.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

from tests.integration.broker_process import (
    BrokerProcess,
    free_port,
    subprocess_env,
    twistd_command,
)
from tests.integration.clients import Collector, connect

PERSISTENT = {"persistent": "true"}


def start(workdir: Path, data_dir: Path, *args: str) -> BrokerProcess:
    """:returns: a broker on ``data_dir``, logging in a fresh directory under ``workdir``."""
    place = workdir / f"run-{len(list(workdir.glob('run-*')))}"
    place.mkdir()
    return BrokerProcess(place, "--data-dir", str(data_dir), *args, http=None)


def kill(broker: BrokerProcess) -> None:
    """End the broker with SIGKILL, as a crash would."""
    broker.process.kill()
    broker.process.wait(timeout=10)
    broker.stop()


def send(broker: BrokerProcess, destination: str, bodies: list[str], **headers: str) -> None:
    """Send each body with a receipt, and wait for all the receipts."""
    connection, collector = connect(broker.address)
    for index, body in enumerate(bodies):
        connection.send(destination, body, headers=dict(headers), receipt=f"r{index}")
    assert collector.wait_for(lambda: len(collector.receipts) == len(bodies))
    connection.disconnect()


def drain(broker: BrokerProcess, destination: str, count: int, **headers: str) -> list[Any]:
    """:returns: the first ``count`` messages of a queue, acknowledged, and no more in a moment."""
    connection, collector = connect(broker.address)
    connection.subscribe(destination, id="s", ack="client-individual", headers=headers)
    assert collector.wait_for(lambda: len(collector.messages) >= count), collector.bodies()
    for message in collector.messages:
        connection.ack(message.headers["ack"])
    assert not collector.wait_for(lambda: len(collector.messages) > count, timeout=0.3)
    connection.disconnect(receipt="bye")
    return collector.messages


def run_twistd(workdir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """Run ``twistd -n stompbroker`` until it ends (a start that fails); output merged."""
    command = [
        *twistd_command(),
        "--nodaemon",
        "--pidfile=",
        "--logfile=-",
        "stompbroker",
        "--port",
        str(free_port()),
        "--http",
        "none",
        *args,
    ]
    return subprocess.run(
        command,
        cwd=workdir,
        env=subprocess_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=30,
    )


def test_persistent_messages_survive_a_restart_and_others_do_not(tmp_path: Path) -> None:
    """
    Issue 5: persistent:true messages come back, in order, after the broker restarts;
    the others lived in memory only.
    """
    data = tmp_path / "data"
    broker = start(tmp_path, data)
    send(broker, "/queue/orders", ["1", "2", "3"], **PERSISTENT)
    send(broker, "/queue/orders", ["memory only"])
    broker.stop()
    broker = start(tmp_path, data)
    try:
        messages = drain(broker, "/queue/orders", 3)
        assert [m.body for m in messages] == [b"1", b"2", b"3"]
        assert all("redelivered" not in m.headers for m in messages)
    finally:
        broker.stop()


def test_delivered_unacknowledged_messages_come_back_redelivered_after_sigkill(
    tmp_path: Path,
) -> None:
    """
    Issue 5: after SIGKILL, a message delivered but not acknowledged returns with
    redelivered:true; an acknowledged one never returns.
    """
    data = tmp_path / "data"
    broker = start(tmp_path, data)
    send(broker, "/queue/jobs", ["acked", "held", "waiting"], **PERSISTENT)
    connection, collector = connect(broker.address)
    connection.subscribe(
        "/queue/jobs", id="s", ack="client-individual", headers={"prefetch-count": "2"}
    )
    assert collector.wait_for(lambda: len(collector.messages) == 2)
    connection.ack(collector.messages[0].headers["ack"], receipt="acked")
    assert collector.wait_for(lambda: "acked" in collector.receipts)
    kill(broker)
    broker = start(tmp_path, data)
    try:
        messages = drain(broker, "/queue/jobs", 2)
        assert [(m.body, m.headers.get("redelivered")) for m in messages] == [
            (b"held", "true"),
            (b"waiting", "true"),
        ]
    finally:
        broker.stop()


def test_persistent_queues_option_keeps_every_queue_message(tmp_path: Path) -> None:
    """--persistent-queues stores queue messages that carry no persistent header."""
    data = tmp_path / "data"
    broker = start(tmp_path, data, "--persistent-queues", "--sync", "always")
    send(broker, "/queue/plain", ["kept"])
    kill(broker)
    broker = start(tmp_path, data, "--persistent-queues")
    try:
        assert [m.body for m in drain(broker, "/queue/plain", 1)] == [b"kept"]
    finally:
        broker.stop()


def test_durable_subscription_and_its_backlog_survive_sigkill(tmp_path: Path) -> None:
    """Issue 5: a durable topic subscription is rebuilt with the persistent messages it has."""
    data = tmp_path / "data"
    durable = {"activemq.subscriptionName": "audit"}
    broker = start(tmp_path, data)
    connection, collector = _client_with_id(broker)
    connection.subscribe("/topic/events.*", id="d", ack="client", headers=durable)
    connection.disconnect(receipt="bye")
    send(broker, "/topic/events.login", ["kept"], **PERSISTENT)
    send(broker, "/topic/events.login", ["not kept"])
    kill(broker)
    broker = start(tmp_path, data)
    try:
        connection, collector = _client_with_id(broker)
        connection.subscribe("/topic/events.*", id="d", ack="client", headers=durable)
        assert collector.wait_for(lambda: collector.messages)
        assert not collector.wait_for(lambda: len(collector.messages) > 1, timeout=0.3)
        assert collector.bodies() == [b"kept"]
        connection.disconnect()
    finally:
        broker.stop()


def _client_with_id(broker: BrokerProcess) -> tuple[Any, Collector]:
    import stomp

    connection = stomp.Connection12([broker.address], auto_decode=False)
    collector = Collector()
    connection.set_listener("collector", collector)
    connection.connect(wait=True, headers={"client-id": "auditor"})
    return connection, collector


def test_a_damaged_data_directory_stops_twistd_with_a_clear_message(tmp_path: Path) -> None:
    """Issue 5: a file that is not a store ends the start with an error, never an empty broker."""
    data = tmp_path / "data"
    data.mkdir()
    (data / "messages.sqlite3").write_bytes(b"not a database at all" * 100)
    finished = run_twistd(tmp_path, "--data-dir", str(data))
    assert finished.returncode != 0, finished.stdout
    assert "is not a readable stompbroker store" in finished.stdout
    assert "restore it from a backup" in finished.stdout


def test_a_store_whose_pages_are_damaged_stops_twistd_after_reading_them(tmp_path: Path) -> None:
    """Damage found only while recovering ends twistd too, with status 1 and the store's advice."""
    data = tmp_path / "data"
    broker = start(tmp_path, data)
    send(broker, "/queue/big", ["x" * 500] * 200, **PERSISTENT)
    broker.stop()
    with open(data / "messages.sqlite3", "r+b") as database:
        database.seek(3 * 4096)
        database.write(b"\xff" * 8192)
    finished = run_twistd(tmp_path, "--data-dir", str(data))
    assert finished.returncode == 1, finished.stdout
    assert "stompbroker cannot start" in finished.stdout
    assert "restore it from a backup" in finished.stdout


def test_a_locked_data_directory_stops_a_second_broker(tmp_path: Path) -> None:
    """Issue 5: two brokers never share a data directory; the second says which process holds it."""
    data = tmp_path / "data"
    broker = start(tmp_path, data)
    try:
        finished = run_twistd(tmp_path, "--data-dir", str(data))
        assert finished.returncode != 0, finished.stdout
        assert "is in use by another broker" in finished.stdout
        assert f"process {broker.process.pid}" in finished.stdout
    finally:
        broker.stop()
