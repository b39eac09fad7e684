"""
The broker on each reactor docs/performance.md compares: ``twistd -r NAME stompbroker``.

epoll is twistd's default on Linux; ``asyncio`` is Twisted's reactor on the
standard event loop; ``uvloop`` is that reactor on uvloop, installed by
:mod:`stompbroker.app.uvloop_reactor` through the plugin in
``twisted/plugins/stompbroker_reactors.py``.  Each must run the broker the same:
topic fan-out, a client-individual queue, and a bad frame answered by an ERROR.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.clients import connect, flush_deliveries, raw_connect
from tests.support.process import BrokerProcess

REACTOR_CLASSES = {
    "epoll": "twisted.internet.epollreactor.EPollReactor",
    "asyncio": "twisted.internet.asyncioreactor.AsyncioSelectorReactor",
    "uvloop": "twisted.internet.asyncioreactor.AsyncioSelectorReactor",
}


@pytest.fixture(params=sorted(REACTOR_CLASSES))
def reactor_broker(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[BrokerProcess]:
    if request.param == "uvloop":
        pytest.importorskip("uvloop")
    process = BrokerProcess(tmp_path, "--data-dir", "none", reactor=request.param)
    try:
        yield process
    finally:
        process.stop()
    assert f"reactor class: {REACTOR_CLASSES[request.param]}" in process.log()


def test_topic_queue_and_bad_input_on_each_reactor(reactor_broker: BrokerProcess) -> None:
    """
    On epoll, asyncio and uvloop alike, topics fan out, queues take acks, and a bad frame gets an
    ERROR.
    """
    address = reactor_broker.address
    topic = f"/topic/reactors.{uuid.uuid4().hex[:8]}"
    queue = f"/queue/reactors.{uuid.uuid4().hex[:8]}"
    subscriber, inbox = connect(address)
    subscriber.subscribe(topic, id="t", receipt="t-ready")
    worker, work = connect(address)
    worker.subscribe(
        queue, id="q", ack="client-individual", receipt="q-ready", headers={"prefetch-count": "100"}
    )
    assert inbox.wait_for(lambda: "t-ready" in inbox.receipts)
    assert work.wait_for(lambda: "q-ready" in work.receipts)

    publisher, sent = connect(address)
    for number in range(200):
        publisher.send(topic, f"t{number}".encode())
        publisher.send(queue, f"q{number}".encode())
    publisher.send(topic, b"end", receipt="published")
    assert sent.wait_for(lambda: "published" in sent.receipts)

    assert inbox.wait_for(lambda: len(inbox.messages) == 201)
    assert inbox.bodies() == [f"t{number}".encode() for number in range(200)] + [b"end"]
    # The window (100) holds the rest back until these are acknowledged.
    assert work.wait_for(lambda: len(work.messages) == 100)
    for frame in list(work.messages):
        worker.ack(frame.headers["ack"])
    assert work.wait_for(lambda: len(work.messages) == 200)
    for frame in work.messages[100:]:
        worker.ack(frame.headers["ack"])
    worker.disconnect(receipt="bye")
    assert work.wait_for(lambda: "bye" in work.receipts)
    assert [frame.body for frame in work.messages] == [f"q{n}".encode() for n in range(200)]

    # Everything was acknowledged: a new consumer finds the queue empty.
    again, later = connect(address)
    again.subscribe(queue, id="q2", ack="client-individual", receipt="q2-ready")
    assert later.wait_for(lambda: "q2-ready" in later.receipts)
    flush_deliveries(again, later)
    assert later.messages == []

    offender = raw_connect(address)
    offender.send(b"BOGUS\n\n\0")
    error = offender.read_frames()[0]
    assert error.command == "ERROR"
    assert "unknown command" in (error.get("message") or "")
    assert offender.closed_by_peer()
    for client in (subscriber, publisher, again):
        client.disconnect()
