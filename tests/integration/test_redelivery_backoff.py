"""
Redelivery back-off on the real broker (``twistd -n stompbroker``), driven by
``stomp.py``: a consumer that NACKs every delivery sees each redelivery later than
the one before, the messages behind it are not held up, and a persistent
message's wait outlives a restart.
"""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Any

from tests.support.clients import Collector, connect, publish
from tests.support.process import BrokerProcess, BrokerStarter, module_broker

broker = module_broker(
    "broker",
    "--redelivery-delay",
    "300",
    "--redelivery-multiplier",
    "2",
    "--max-redeliveries",
    "3",
    http=None,
)


class Stamped(Collector):
    """A collector that notes when each MESSAGE arrived (monotonic seconds)."""

    def __init__(self) -> None:
        super().__init__()
        self.arrivals: list[tuple[bytes, float]] = []

    def on_message(self, frame: Any) -> None:
        self.arrivals.append((frame.body, time.monotonic()))
        super().on_message(frame)


def test_a_nack_loop_backs_off_and_blocks_nothing(broker: BrokerProcess) -> None:
    """
    A poison message NACKed at once every time comes back after 0.3 s, 0.6 s, 1.2 s
    (--redelivery-delay 300, multiplier 2), then goes to its dead-letter queue; the
    message sent behind it is delivered meanwhile.
    """
    destination = f"/queue/backoff.{uuid.uuid4().hex[:8]}"
    name = destination.split("/")[-1]
    watcher, dead = connect(broker.address)
    watcher.subscribe(f"/queue/DLQ.{name}", id="dlq", receipt="watching")
    assert dead.wait_for(lambda: "watching" in dead.receipts)
    consumer, inbox = connect(broker.address, collector=Stamped())
    consumer.subscribe(destination, id="s", ack="client-individual", receipt="subscribed")
    assert inbox.wait_for(lambda: "subscribed" in inbox.receipts)
    publish(broker.address, destination, [b"poison"])

    def poisons() -> list[Any]:
        return [m for m in inbox.messages if m.body == b"poison"]

    for count in range(1, 5):
        assert inbox.wait_for(lambda n=count: len(poisons()) == n, timeout=5)
        consumer.nack(poisons()[-1].headers["ack"])
        if count == 1:
            publish(broker.address, destination, [b"fine"])
            assert inbox.wait_for(lambda: b"fine" in inbox.bodies(), timeout=0.25)
            consumer.ack(inbox.messages[-1].headers["ack"])
    assert dead.wait_for(lambda: len(dead.messages) == 1, timeout=10)
    times = [at for body, at in inbox.arrivals if body == b"poison"]
    gaps = [later - earlier for earlier, later in zip(times, times[1:], strict=False)]
    for gap, wait in zip(gaps, (0.3, 0.6, 1.2), strict=True):
        assert wait <= gap < wait + 1.0, gaps
    assert dead.messages[0].headers["dead-letter-reason"] == "delivery-limit"
    consumer.disconnect()
    watcher.disconnect()


def test_a_subscription_sets_its_own_delay(broker: BrokerProcess) -> None:
    """redelivery-delay:0 on the SUBSCRIBE redelivers a NACKed message at once."""
    destination = f"/queue/backoff.{uuid.uuid4().hex[:8]}"
    consumer, inbox = connect(broker.address, collector=Stamped())
    consumer.subscribe(
        destination,
        id="s",
        ack="client-individual",
        headers={"redelivery-delay": "0", "receipt": "subscribed"},
    )
    assert inbox.wait_for(lambda: "subscribed" in inbox.receipts)
    publish(broker.address, destination, [b"1"])
    assert inbox.wait_for(lambda: len(inbox.messages) == 1)
    consumer.nack(inbox.messages[0].headers["ack"])
    assert inbox.wait_for(lambda: len(inbox.messages) == 2, timeout=0.25)
    assert inbox.messages[1].headers["redelivery-count"] == "1"
    consumer.disconnect()


def test_a_persistent_message_waits_out_its_delay_after_a_restart(
    tmp_path: Path, start: BrokerStarter
) -> None:
    """A NACKed persistent message's due time is stored: after a restart it still waits."""
    data = tmp_path / "data"
    first = start(data, "--redelivery-delay", "4000")
    consumer, inbox = connect(first.address)
    consumer.subscribe("/queue/jobs", id="s", ack="client-individual", receipt="subscribed")
    assert inbox.wait_for(lambda: "subscribed" in inbox.receipts)
    publish(first.address, "/queue/jobs", [b"1"], persistent="true")
    assert inbox.wait_for(lambda: len(inbox.messages) == 1)
    consumer.nack(inbox.messages[0].headers["ack"], receipt="nacked")
    assert inbox.wait_for(lambda: "nacked" in inbox.receipts)
    nacked_at = time.monotonic()
    first.stop()
    second = start(data, "--redelivery-delay", "4000")
    try:
        again, events = connect(second.address, collector=Stamped())
        again.subscribe("/queue/jobs", id="s", ack="client-individual")
        assert events.wait_for(lambda: len(events.messages) == 1, timeout=10)
        assert events.arrivals[0][1] - nacked_at >= 3.9
        assert events.messages[0].headers["redelivery-count"] == "1"
        again.disconnect()
    finally:
        second.stop()
