"""
Hostile clients against the real broker: each must end with an ERROR and a close, and
the broker must stay small and keep serving everyone else.

One broker serves the module, with short timeouts and a small slow-consumer
buffer so that every case ends within seconds.  A bystander subscriber checks,
after each case, that other clients never noticed.
"""

from __future__ import annotations

import socket
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from benchmarks.measure import process_rss_kb
from tests.support.clients import Bystander, RawClient, raw_connect
from tests.support.process import BrokerProcess, module_broker

TIMEOUTS = ("--heartbeat", "0,0", "--connect-timeout", "1", "--frame-timeout", "1")
LIMITS = ("--max-subscriptions", "500", "--slow-consumer-buffer", "1M")
LIMITS += ("--max-frame-size", str(4 << 20))
hostile_broker = module_broker(
    "hostile_broker", *TIMEOUTS, *LIMITS, "--data-dir", "none", http=None
)


@pytest.fixture
def bystander(hostile_broker: BrokerProcess) -> Iterator[Any]:
    """:returns: a check that a well-behaved subscriber still gets what is published to it."""
    with Bystander(hostile_broker.address) as watcher:
        yield watcher.still_receiving


def ended_with(client: RawClient, message: str, timeout: float = 5.0) -> bool:
    """:returns: whether the broker sent an ERROR with this message, then closed."""
    frames = client.read_frames(count=100, timeout=timeout)
    errors = [frame for frame in frames if frame.command == "ERROR"]
    return bool(errors) and errors[-1].get("message") == message and client.closed_by_peer(timeout)


def test_megabytes_without_nul_end_at_the_frame_size_limit(
    hostile_broker: BrokerProcess, bystander: Any
) -> None:
    """A body that never ends is refused once it passes max-frame-size; no more is buffered."""
    client = raw_connect(hostile_broker.address)
    client.send(b"SEND\ndestination:/topic/void\n\n")
    client.send_until_closed(b"x" * 65536 * 100)
    frames = client.read_frames(count=1, timeout=5)
    assert frames and frames[0].command == "ERROR"
    assert frames[0].get("message", "").startswith("frame too large")
    client.close()
    assert bystander()


def test_header_without_colon_is_an_error(hostile_broker: BrokerProcess, bystander: Any) -> None:
    """STOMP 1.2, "Augmented BNF": a header line without a colon gets an ERROR and a close."""
    client = raw_connect(hostile_broker.address)
    client.send(b"SEND\ndestination:/topic/a\nno colon here\n\nbody\x00")
    assert ended_with(client, "header line without a colon: 'no colon here'")
    client.close()
    assert bystander()


def test_content_length_larger_than_the_body_then_silence(
    hostile_broker: BrokerProcess, bystander: Any
) -> None:
    """A frame announced longer than what comes, then silence, ends at the frame timeout."""
    client = raw_connect(hostile_broker.address)
    client.send(b"SEND\ndestination:/topic/a\ncontent-length:1000\n\nonly this much")
    started = time.monotonic()
    assert ended_with(client, "frame timeout")
    assert time.monotonic() - started < 4
    client.close()
    assert bystander()


def test_socket_that_never_connects_is_closed(
    hostile_broker: BrokerProcess, bystander: Any
) -> None:
    """A socket that sends half a CONNECT, then nothing, is closed at the connect timeout."""
    client = RawClient(hostile_broker.address)
    client.send(b"CONNECT\naccept-version:1.2\n")
    assert ended_with(client, "connect timeout")
    client.close()
    silent = RawClient(hostile_broker.address)
    assert ended_with(silent, "connect timeout")
    silent.close()
    assert bystander()


def test_thousands_of_subscribes_stop_at_the_limit(
    hostile_broker: BrokerProcess, bystander: Any
) -> None:
    """A client subscribing without end is cut off at max-subscriptions; its subscriptions go."""
    client = raw_connect(hostile_broker.address)
    frames = b"".join(
        b"SUBSCRIBE\nid:%d\ndestination:/topic/many.%d\n\n\x00" % (number, number)
        for number in range(3000)
    )
    client.send_until_closed(frames)
    assert ended_with(client, "too many subscriptions")
    client.close()
    assert bystander()


def test_client_that_never_reads_is_dropped_while_others_are_served(
    hostile_broker: BrokerProcess, bystander: Any
) -> None:
    """
    A subscriber that stops reading is disconnected once its buffer is full; the broker's memory
    stays bounded and another subscriber of the same topic gets every message.
    """
    destination = f"/topic/flood.{uuid.uuid4().hex[:8]}"
    stalled = raw_connect(hostile_broker.address)
    stalled.socket.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
    assert stalled.subscribe(destination).command == "RECEIPT"
    reader = raw_connect(hostile_broker.address)
    assert reader.subscribe(destination).command == "RECEIPT"
    messages, body = 10000, b"x" * 10000
    received = [0]

    def read_everything() -> None:
        reader.socket.settimeout(20)
        while received[0] < messages:
            data = reader.socket.recv(1 << 20)
            if not data:
                return
            received[0] += data.count(b"\x00")

    reading = threading.Thread(target=read_everything, daemon=True)
    reading.start()
    before = process_rss_kb(hostile_broker.process.pid)
    assert before is not None
    publisher = raw_connect(hostile_broker.address)
    frame = f"SEND\ndestination:{destination}\n\n".encode() + body + b"\x00"
    # The publisher stays at most AHEAD messages (400 KB) ahead of the reader, so a reader
    # slowed by a busy machine never trails by the 1 MiB that marks a slow consumer, while
    # the stalled client falls behind by everything.
    batch, ahead = 20, 40
    for sent in range(batch, messages + 1, batch):
        deadline = time.monotonic() + 30
        while sent - batch - received[0] > ahead and time.monotonic() < deadline:
            time.sleep(0.001)
        publisher.send(frame * batch)
    publisher.send(b"DISCONNECT\nreceipt:done\n\n\x00")
    assert publisher.read_frames(count=1, timeout=30)[0].command == "RECEIPT"
    reading.join(timeout=30)
    assert received[0] == messages
    after = process_rss_kb(hostile_broker.process.pid)
    assert after is not None
    growth_mb = (after - before) / 1024
    assert growth_mb < 40, f"the broker grew by {growth_mb:.0f} MB for 100 MB published"
    assert "disconnecting slow consumer" in hostile_broker.log()
    for client in (stalled, reader, publisher):
        client.close()
    assert bystander()
