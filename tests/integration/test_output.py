"""
What a person reads from a running broker: the start-up banner says what listens
where as URLs and how the broker runs, the start logs no ``<... object at 0x...>``,
and a stop says how many waiting messages it drops and where.
"""

from __future__ import annotations

from pathlib import Path

from tests.support.clients import publish
from tests.support.process import BrokerProcess


def test_the_banner_lists_the_listeners_as_urls_and_how_the_broker_runs(tmp_path: Path) -> None:
    """The banner names the STOMP, WebSocket and console URLs, engine, auth, store and reactor."""
    with BrokerProcess(tmp_path, "--auth", "memory:alice:secret") as broker:
        pass
    log = broker.log()
    assert f"  STOMP      stomp://127.0.0.1:{broker.port}\n" in log
    assert f"  WebSocket  ws://127.0.0.1:{broker.http_port}/ws\n" in log
    assert f"  console    http://127.0.0.1:{broker.http_port}/console\n" in log
    assert "  engine     memory\n" in log
    assert "  auth       memory; clients without a login refused\n" in log
    assert (
        f"  store      {tmp_path / 'stompbroker-data'} (SQLite, sync batch, disk alarm under 50M)\n"
        in log
    )
    assert "  reactor    epoll (uvloop not running" in log
    assert "secret" not in log
    assert "object at 0x" not in log


def test_a_stop_says_how_many_messages_it_drops_per_destination(tmp_path: Path) -> None:
    """Non-persistent messages waiting at SIGTERM are counted in the log, per queue."""
    broker = BrokerProcess(tmp_path, http=None)
    try:
        publish(broker.address, "/queue/orders", ["a", "b", "c"])
        publish(broker.address, "/queue/kept", ["d"], persistent="true")
        publish(broker.address, "/queue/one", ["e"])
    finally:
        broker.stop()
    log = broker.log()
    assert "dropped 3 non-persistent messages waiting in /queue/orders at shutdown" in log
    assert "dropped 1 non-persistent message waiting in /queue/one at shutdown" in log
    assert "/queue/kept at shutdown" not in log
