"""
Redelivery back-off with the redis engine (docs/cluster.md, "Redelivery back-off"):
two ``twistd`` nodes on a real ``redis-server``, driven by ``stomp.py``.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.clients import Collector, connect, publish
from tests.support.process import BrokerProcess
from tests.support.redis import RedisServer, redis_server, started_nodes  # noqa: F401


@pytest.fixture(scope="module")
def nodes(
    redis_server: RedisServer,  # noqa: F811
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[list[BrokerProcess]]:
    """Two nodes, A and B, on one Redis server."""
    with started_nodes(tmp_path_factory, redis_server, "ab") as started:
        yield started


class Stamped(Collector):
    """A collector that notes when each MESSAGE arrived (monotonic seconds)."""

    def __init__(self) -> None:
        super().__init__()
        self.arrivals: list[float] = []

    def on_message(self, frame: Any) -> None:
        self.arrivals.append(time.monotonic())
        super().on_message(frame)


def subscribed(process: BrokerProcess, queue: str, **headers: str) -> tuple[Any, Stamped]:
    connection, inbox = connect(process.address, collector=Stamped())
    connection.subscribe(
        queue, id="s", ack="client-individual", headers=dict(headers, receipt="subscribed")
    )
    assert inbox.wait_for(lambda: "subscribed" in inbox.receipts)
    return connection, inbox


def test_a_nacked_message_waits_on_its_node_and_blocks_nothing(
    nodes: list[BrokerProcess],
) -> None:
    """A NACK on node A redelivers there after the subscription's delay; later messages pass."""
    a, b = nodes
    queue = f"/queue/backoff.{uuid.uuid4().hex[:8]}"
    consumer, inbox = subscribed(a, queue, **{"redelivery-delay": "800"})
    publish(b.address, queue, [b"poison"])
    assert inbox.wait_for(lambda: len(inbox.messages) == 1, timeout=10)
    consumer.nack(inbox.messages[0].headers["ack"])
    nacked = time.monotonic()
    publish(b.address, queue, [b"fine"])
    assert inbox.wait_for(lambda: b"fine" in inbox.bodies(), timeout=5)
    assert inbox.wait_for(lambda: inbox.bodies().count(b"poison") == 2, timeout=10)
    assert inbox.bodies() == [b"poison", b"fine", b"poison"]
    assert inbox.arrivals[2] - nacked >= 0.75
    assert inbox.messages[2].headers["redelivery-count"] == "1"
    consumer.disconnect()


def test_a_waiting_message_goes_to_another_node_when_its_node_s_consumer_leaves(
    nodes: list[BrokerProcess],
) -> None:
    """
    When node A's last consumer leaves during a wait, the message goes back to the stream
    at once and node B's consumer gets it without the rest of the wait.
    """
    a, b = nodes
    queue = f"/queue/backoff.{uuid.uuid4().hex[:8]}"
    leaving, held = subscribed(a, queue, **{"redelivery-delay": "60000"})
    publish(b.address, queue, [b"job"])
    assert held.wait_for(lambda: len(held.messages) == 1, timeout=10)
    leaving.nack(held.messages[0].headers["ack"], receipt="nacked")
    assert held.wait_for(lambda: "nacked" in held.receipts)
    other, inbox = subscribed(b, queue)
    leaving.disconnect()
    assert inbox.wait_for(lambda: len(inbox.messages) == 1, timeout=10)
    assert inbox.messages[0].body == b"job"
    assert inbox.messages[0].headers.get("redelivered") == "true"
    other.disconnect()
