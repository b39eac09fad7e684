"""
The real broker (``twistd -n stompbroker``) driven by ``stomp.py`` and raw sockets.

Every bad-input case checks that the offender gets an ERROR and a close while a
second, well-behaved client on the same broker keeps receiving.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from stompbroker.protocol.frames import Frame
from tests.support.clients import Bystander, RawClient, connect, flush_deliveries, raw_connect
from tests.support.process import BrokerProcess, run_twistd

VERSIONS = ["1.0", "1.1", "1.2"]


def unique(prefix: str = "/topic/t") -> str:
    return f"{prefix}.{uuid.uuid4().hex[:8]}"


@pytest.fixture
def bystander(broker: BrokerProcess) -> Iterator[Any]:
    """:returns: a check that a well-behaved subscriber still gets what is published to it."""
    with Bystander(broker.address) as watcher:
        yield watcher.still_receiving


@pytest.mark.parametrize("version", VERSIONS)
def test_subscribe_send_receive(broker: BrokerProcess, version: str) -> None:
    """A stomp.py client of each version receives what another sends, with all headers."""
    subscriber, inbox = connect(broker.address, version)
    publisher, publisher_events = connect(broker.address, version)
    destination = unique()
    if version == "1.0":
        subscriber.subscribe(destination, receipt="subscribed")
    else:
        subscriber.subscribe(destination, id="s1", receipt="subscribed")
    assert inbox.wait_for(lambda: "subscribed" in inbox.receipts)
    body = b"hello \x00 world" if version != "1.0" else b"hello world"
    publisher.send(
        destination,
        body,
        content_type="application/octet-stream",
        headers={"x-k": "v"},
        receipt="r1",
    )
    assert inbox.wait_for(lambda: len(inbox.messages) == 1)
    assert publisher_events.wait_for(lambda: "r1" in publisher_events.receipts)
    message = inbox.messages[0]
    assert message.body == body
    assert message.headers["destination"] == destination
    assert message.headers["x-k"] == "v"
    assert message.headers["content-type"] == "application/octet-stream"
    assert message.headers["message-id"]
    # A 1.0 SUBSCRIBE without id gets no subscription header, as from ActiveMQ (issue 14).
    assert message.headers.get("subscription") == ("s1" if version != "1.0" else None)
    assert "receipt" not in message.headers
    subscriber.disconnect()
    publisher.disconnect()


def test_wildcards(broker: BrokerProcess) -> None:
    """`*` matches one segment, `#` and `>` any trailing segments, with `/` or `.` separators."""
    base = unique("/topic/w")
    subscriber, inbox = connect(broker.address)
    subscriber.subscribe(f"{base}.*", id="star")
    subscriber.subscribe(f"{base}.#", id="hash")
    subscriber.subscribe(f"{base}/>", id="gt", receipt="ready")
    assert inbox.wait_for(lambda: "ready" in inbox.receipts)
    publisher, _ = connect(broker.address)
    for suffix in ("", ".one", "/one/two"):
        publisher.send(base + suffix, suffix.encode() or b"base")
    expected = {
        ("hash", b"base"),
        ("gt", b"base"),
        ("star", b".one"),
        ("hash", b".one"),
        ("gt", b".one"),
        ("hash", b"/one/two"),
        ("gt", b"/one/two"),
    }
    assert inbox.wait_for(lambda: len(inbox.messages) >= len(expected))
    flush_deliveries(subscriber, inbox, sender=publisher)
    got = {(m.headers["subscription"], m.body) for m in inbox.messages}
    assert got == expected
    assert len(inbox.messages) == len(expected)
    subscriber.disconnect()
    publisher.disconnect()


def test_unsubscribe_stops_delivery(broker: BrokerProcess) -> None:
    """After UNSUBSCRIBE with a receipt, nothing more arrives for that subscription."""
    destination = unique()
    subscriber, inbox = connect(broker.address)
    subscriber.subscribe(destination, id="1", receipt="s")
    assert inbox.wait_for(lambda: "s" in inbox.receipts)
    subscriber.unsubscribe(id="1", receipt="u")
    assert inbox.wait_for(lambda: "u" in inbox.receipts)
    publisher, events = connect(broker.address)
    publisher.send(destination, b"late", receipt="r")
    assert events.wait_for(lambda: "r" in events.receipts)
    flush_deliveries(subscriber, inbox)
    assert inbox.messages == []
    subscriber.disconnect()
    publisher.disconnect()


def test_heartbeats_kept(broker: BrokerProcess) -> None:
    """A client that heart-beats stays connected, and receives the broker's heart-beats."""
    connection, events = connect(broker.address, "1.2", heartbeats=(500, 500))
    assert events.wait_for(lambda: events.heartbeats >= 3, timeout=5)
    assert connection.is_connected()
    assert not events.errors
    connection.disconnect()


def test_heartbeats_missed(broker: BrokerProcess, bystander: Any) -> None:
    """A client that promised heart-beats and stays silent gets an ERROR and is closed."""
    client = raw_connect(broker.address, heart_beat="500,0")
    started = time.monotonic()
    frames = client.read_frames(count=10, timeout=5)
    elapsed = time.monotonic() - started
    assert frames and frames[-1].command == "ERROR"
    assert frames[-1].get("message") == "heart-beat timeout"
    assert 0.9 <= elapsed < 3.0
    assert client.closed_by_peer()
    assert bystander()


def test_disconnect_with_receipt(broker: BrokerProcess) -> None:
    """DISCONNECT gets its RECEIPT, then the broker closes the connection."""
    client = raw_connect(broker.address)
    client.send(b"DISCONNECT\nreceipt:bye\n\n\x00")
    assert client.read_frames() == [Frame("RECEIPT", (("receipt-id", "bye"),))]
    assert client.closed_by_peer()


def bad(case: str, data: bytes, message: str, needs_connect: bool = True) -> Any:
    """:returns: a case of :func:`test_bad_input_gets_error_and_close`, named ``case``."""
    return pytest.param(data, message, needs_connect, id=case)


SEND_FIRST = b"SEND\ndestination:/topic/x\nreceipt:r0\n\nbody\x00"
BAD_INPUTS = [
    bad("frame-before-connect", SEND_FIRST, "expected CONNECT", needs_connect=False),
    bad("unknown-command", b"FROB\nreceipt:r1\n\n\x00", "unknown command"),
    bad("no-destination", b"SEND\nreceipt:r2\n\nbody\x00", "missing destination header"),
    bad("no-id", b"SUBSCRIBE\ndestination:/topic/x\nreceipt:r3\n\n\x00", "missing id header"),
    bad("no-colon", b"SEND\ndestination /topic/x\n\nbody\x00", "header line without a colon"),
    bad(
        "content-length-lies",
        b"SEND\ndestination:/topic/x\ncontent-length:2\n\nbody\x00",
        "not terminated by NUL",
    ),
    bad("bad-escape", b"SEND\ndestination:/topic/a\\tb\n\n\x00", "undefined escape sequence"),
    bad(
        "wildcard-send",
        b"SEND\ndestination:/topic/x.*\nreceipt:r4\n\n\x00",
        "wildcard in SEND destination",
    ),
    bad("unknown-dest", b"SEND\ndestination:/nowhere\n\n\x00", "unknown destination"),
    bad(
        "oversized-body",
        # Over the default 100 MiB limit, refused as soon as announced; test_hostile streams
        # a body over a lower limit.
        b"SEND\ndestination:/topic/x\ncontent-length:%d\n\n" % (101 * 1024 * 1024),
        "frame too large",
    ),
    bad(
        "long-header",
        b"SEND\ndestination:/topic/x\nx-big:" + b"y" * 20000 + b"\n\n\x00",
        "header line too long",
    ),
    bad(
        "many-headers",
        b"SEND\ndestination:/topic/x\n" + b"h:v\n" * 1001 + b"\n\x00",
        "too many headers",
    ),
]


@pytest.mark.parametrize("data, message, needs_connect", BAD_INPUTS)
def test_bad_input_gets_error_and_close(
    broker: BrokerProcess, bystander: Any, data: bytes, message: str, needs_connect: bool
) -> None:
    """Each kind of bad input gets an ERROR naming the problem, then a close; others carry on."""
    client = RawClient(broker.address)
    if needs_connect:
        client.connect()
    client.send_until_closed(data)  # the broker may close before a huge frame is all sent
    frames = client.read_frames()
    assert frames, "no ERROR frame arrived"
    error = frames[-1]
    assert error.command == "ERROR"
    assert message in error.get("message", ""), error
    assert error.body, "the ERROR body should explain the problem"
    if b"receipt:" in data[:200]:
        assert error.get("receipt-id") is not None
    assert client.closed_by_peer()
    client.close()
    assert bystander()


def test_client_vanishing_mid_frame(broker: BrokerProcess, bystander: Any) -> None:
    """A client that disconnects half-way through a frame affects no one."""
    client = raw_connect(broker.address)
    client.send(b"SEND\ndestination:/topic/x\ncontent-length:100\n\nhalf")
    client.close()
    assert bystander()


def test_max_connections(tmp_path: Any) -> None:
    """With --max-connections N the next client gets an ERROR naming the limit."""
    with BrokerProcess(tmp_path, "--max-connections", "2") as broker:
        # The port probe in BrokerProcess has closed by now; give the broker a moment to see it.
        time.sleep(0.2)
        first, second = RawClient(broker.address), RawClient(broker.address)
        first.connect()
        second.connect()
        third = RawClient(broker.address)
        [error] = third.read_frames()
        assert error.get("message") == "too many connections"
        assert third.closed_by_peer()
        second.close()
        time.sleep(0.2)
        fourth = RawClient(broker.address)
        assert fourth.connect().command == "CONNECTED"


def test_help_documents_every_option() -> None:
    """``twistd stompbroker --help`` lists every option the issue names."""
    finished = run_twistd("stompbroker", "--help")
    assert finished.returncode == 0, finished.stdout
    output = finished.stdout
    for option in (
        "--port",
        "--listen",
        "--max-frame-size",
        "--max-header-length",
        "--max-headers",
        "--heartbeat",
        "--max-connections",
        "--log-level",
    ):
        assert option in output
