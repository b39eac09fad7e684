"""
Rate limits on the real broker, with ``stomp.py``: a publisher faster than
``--rate-limit-messages`` is slowed (the broker reads it no more until it is
back at its rate) and keeps its connection; one that stays over for
``--rate-limit-over-time`` gets an ERROR naming the limit, and is closed.
``/stats`` counts both.  The burst holds per SEND, however many a read (TCP)
or a socket read's WebSocket messages hold.
"""

from __future__ import annotations

import json
import time
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
import websocket

from tests.support.clients import RawClient, connect
from tests.support.process import BrokerProcess

RATE = 500
OVER_TIME = 2.0
#: Bytes of each message: a read (up to 64 KiB) then holds few of them.
BODY = 1000


def start(tmp_path_factory: pytest.TempPathFactory, *options: str) -> BrokerProcess:
    workdir = tmp_path_factory.mktemp("rate-limits")
    return BrokerProcess(
        workdir, "--rate-limit-messages", f"{RATE}/{RATE}", "--data-dir", "none", *options
    )


@pytest.fixture(scope="module")
def slowing(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """A broker that slows fast publishers, and never closes them for it."""
    with start(tmp_path_factory) as process:
        yield process


@pytest.fixture(scope="module")
def closing(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """A broker that closes a publisher over its rate for OVER_TIME seconds."""
    with start(tmp_path_factory, "--rate-limit-over-time", str(OVER_TIME)) as process:
        yield process


#: The burst test's rate and burst, and how many SENDs its client sends at once.
BURST_RATE, BURST, FLOOD = 10, 50, 496


@pytest.fixture(scope="module")
def bursting(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """A broker whose connections may send BURST_RATE SENDs a second, BURST at once."""
    workdir = tmp_path_factory.mktemp("rate-burst")
    limit = f"{BURST_RATE}/{BURST}"
    with BrokerProcess(workdir, "--rate-limit-messages", limit, "--data-dir", "none") as process:
        yield process


def flood_frames(destination: str) -> list[bytes]:
    """:returns: FLOOD small SENDs to ``destination``."""
    return [b"SEND\ndestination:%s\n\n%d\x00" % (destination.encode(), n) for n in range(FLOOD)]


def assert_burst_held(broker: BrokerProcess, destination: str, started: float) -> None:
    """Half a second after the flood, the broker has handled no more than the burst allows."""
    time.sleep(0.5)
    handled = stats(broker)["destinations"].get(destination, {}).get("messages_in", 0)
    allowed = BURST + BURST_RATE * (time.monotonic() - started) + 1
    assert 0 < handled <= allowed, f"{handled} SENDs handled, {allowed:.0f} allowed"


def test_the_burst_holds_over_tcp_for_a_read_of_many_sends(bursting: BrokerProcess) -> None:
    """496 SENDs in one write (one read, or a few): the broker handles the burst and waits."""
    client = RawClient(bursting.address)
    client.send(b"CONNECT\naccept-version:1.2\nhost:/\nheart-beat:0,0\n\n\x00")
    assert client.read_frames(count=1)[0].command == "CONNECTED"
    started = time.monotonic()
    client.send(b"".join(flood_frames("/topic/burst.tcp")))
    assert_burst_held(bursting, "/topic/burst.tcp", started)
    client.close()


def test_the_burst_holds_over_websocket(bursting: BrokerProcess) -> None:
    """496 WebSocket messages of one SEND each, sent at once: the same burst holds."""
    client = websocket.create_connection(bursting.ws_url, subprotocols=["v12.stomp"], timeout=10)
    client.send("CONNECT\naccept-version:1.2\nhost:/\nheart-beat:0,0\n\n\x00")
    assert client.recv().startswith("CONNECTED")
    started = time.monotonic()
    for frame in flood_frames("/topic/burst.ws"):
        client.send(frame.decode())
    assert_burst_held(bursting, "/topic/burst.ws", started)
    client.close()


def stats(broker: BrokerProcess) -> dict[str, Any]:
    with urllib.request.urlopen(f"http://127.0.0.1:{broker.http_port}/stats", timeout=10) as page:
        document: dict[str, Any] = json.load(page)
    return document


def test_a_fast_publisher_is_slowed_not_disconnected(slowing: BrokerProcess) -> None:
    """
    2500 messages of 1 KiB sent in a second or two, at 500/s with a burst of 500: the
    broker has read no more than its rate allows when they are sent, and reads
    the rest at its rate, with the connection kept.
    """
    connection, collector = connect(slowing.address)
    started = time.monotonic()
    for batch in range(50):
        for index in range(50):
            connection.send("/topic/fast", f"{batch}-{index}".encode().ljust(BODY, b"."))
        time.sleep(0.02)
    read = stats(slowing)["destinations"]["/topic/fast"]["messages_in"]
    sending = time.monotonic() - started
    # The burst, the rate since, and the one SEND that went over (docs/limits.md,
    # "Rate limits"), with a read's worth of slack.
    one_read = 65536 // BODY + 1
    assert read <= RATE * (1 + sending) + one_read, f"{read} messages read in {sending:.2f} s"
    assert read < 2500
    connection.send("/topic/fast", b"last", receipt="last")
    assert collector.wait_for(lambda: "last" in collector.receipts, timeout=30)
    elapsed = time.monotonic() - started
    # Everything past the burst and the last read waited for tokens at RATE.
    least = (2500 - RATE - one_read) / RATE
    assert elapsed >= least, f"read in {elapsed:.2f} s (at least {least:.2f} s): not slowed"
    assert not collector.errors and connection.is_connected()
    figures = stats(slowing)["rate_limits"]
    assert figures["slowed_total"] >= 1
    assert figures["disconnected"] == 0
    connection.disconnect()


def test_a_publisher_kept_over_its_rate_gets_an_error(closing: BrokerProcess) -> None:
    """Ten seconds' worth of messages at once: after the over time, an ERROR and the close."""
    connection, collector = connect(closing.address)
    started = time.monotonic()
    for index in range(10 * RATE):
        connection.send("/topic/flood", str(index).encode())
    assert collector.wait_for(lambda: bool(collector.errors), timeout=20)
    elapsed = time.monotonic() - started
    [error] = collector.errors
    assert error.headers["message"] == "rate limit exceeded"
    assert b"rate-limit-messages" in error.body
    assert OVER_TIME - 0.5 <= elapsed < OVER_TIME + 5
    assert collector.wait_for(lambda: collector.disconnected, timeout=10)
    assert stats(closing)["rate_limits"]["disconnected"] == 1
