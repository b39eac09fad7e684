"""
Duplicate detection on the real broker (``twistd -n stompbroker``), driven by
``stomp.py``: a SEND retried after its connection dropped, with the same
``duplicate-id``, is queued once, and still once when the broker was SIGKILLed
right after the first RECEIPT and restarted on its data directory.
"""

from __future__ import annotations

from pathlib import Path

from tests.support.clients import Collector, RawClient, connect, drain
from tests.support.process import BrokerProcess, BrokerStarter

SEND = (
    b"SEND\ndestination:/queue/orders\nduplicate-id:order-%d\npersistent:true\n"
    b"receipt:first\n\nattempt 1\x00"
)


def retry(broker: BrokerProcess, number: int, collector: Collector | None = None) -> None:
    """Connect again and send order ``number`` once more, same id, until its RECEIPT comes."""
    connection, events = connect(broker.address, collector=collector)
    connection.send(
        "/queue/orders",
        b"attempt 2",
        headers={"duplicate-id": f"order-{number}", "persistent": "true"},
        receipt="retry",
    )
    assert events.wait_for(lambda: "retry" in events.receipts), events.receipts
    connection.disconnect()


def test_a_send_retried_after_its_connection_dropped_is_queued_once(
    tmp_path: Path, start: BrokerStarter
) -> None:
    """
    The first attempt's connection drops before its RECEIPT is read (or it is lost); the
    client connects again and sends the same message with the same id: one message queued.
    A different id is a different message.
    """
    broker = start(tmp_path / "data")
    try:
        client = RawClient(broker.address)
        client.connect()
        client.send(SEND % 1)
        client.close()
        retry(broker, 1)
        retry(broker, 2)
        messages = drain(broker, "/queue/orders", 2)
        # Whichever attempt of order 1 the broker read first is the one queued.
        assert [m.headers["duplicate-id"] for m in messages] == ["order-1", "order-2"]
    finally:
        broker.stop()


def test_a_send_retried_after_sigkill_and_restart_is_queued_once(
    tmp_path: Path, start: BrokerStarter
) -> None:
    """
    The broker is SIGKILLed right after the RECEIPT of a persistent SEND, and the message was
    consumed before: the restarted broker still knows the id, so the retry is not queued.
    """
    data = tmp_path / "data"
    broker = start(data)
    connection, events = connect(broker.address)
    connection.send(
        "/queue/orders",
        b"consumed",
        headers={"duplicate-id": "order-1", "persistent": "true"},
        receipt="consumed",
    )
    assert events.wait_for(lambda: "consumed" in events.receipts)
    drain(broker, "/queue/orders", 1)
    client = RawClient(broker.address)
    client.connect()
    client.send(SEND % 2)
    [receipt] = client.read_frames(count=1)
    assert receipt.get("receipt-id") == "first"
    broker.kill()
    broker = start(data)
    try:
        retry(broker, 1)
        retry(broker, 2)
        retry(broker, 3)
        messages = drain(broker, "/queue/orders", 2)
        assert [(m.headers["duplicate-id"], m.body) for m in messages] == [
            ("order-2", b"attempt 1"),
            ("order-3", b"attempt 2"),
        ]
    finally:
        broker.stop()
