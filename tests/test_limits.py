"""
Tests of the broker's limits and timeouts, and of its graceful stop, without sockets.

Each connection is the real TCP adapter, session and broker on a
``StringTransportWithDisconnection`` (:class:`tests.support.tcp.Client`), with time
on a ``task.Clock``.  Every
breach must end the same way: an ERROR whose ``message`` names the limit, then
a close (STOMP 1.2, "ERROR").
"""

from __future__ import annotations

from typing import Any

import pytest
from twisted.internet.task import Clock
from twisted.python import usage

from stompbroker.app.options import parse_size
from stompbroker.broker.service import Broker, Limits
from stompbroker.protocol.session import SessionConfig, State
from stompbroker.transport.tcp import CLOSE_TIMEOUT, stomp_server_factory
from tests.support.options import parse
from tests.support.tcp import NO_WATERMARK, Client

#: A session configuration without heart-beats, so that only the limit under test acts.
QUIET = SessionConfig(heartbeat=(0, 0))


def broker_and_factory(
    clock: Clock, limits: Limits = NO_WATERMARK, config: SessionConfig = QUIET
) -> tuple[Broker, Any]:
    broker = Broker(clock, limits=limits)
    return broker, stomp_server_factory(broker, clock, config)


# -- connections ------------------------------------------------------------------


def test_default_limits_protect_a_small_machine() -> None:
    """Every limit has a finite default but the per-address one (clients behind a NAT share it)."""
    limits, config = Limits(), SessionConfig()
    assert limits.max_connections == 10000
    assert limits.max_connections_per_address == 0
    assert (limits.max_transactions, limits.max_transaction_frames) == (100, 10000)
    assert 0 < limits.memory_low_mark < limits.memory_high
    assert (config.max_subscriptions, config.connect_timeout, config.frame_timeout) == (
        1000,
        10,
        60,
    )
    # A frame larger than the slow-consumer buffer still passes: one message alone never
    # fills it (issue 14).
    assert (config.max_frame_size, config.slow_consumer_buffer) == (100 << 20, 8 << 20)


def test_connections_per_address_are_limited_and_freed() -> None:
    """The connection over max-connections-per-address gets an ERROR naming it; others get in."""
    clock = Clock()
    _, factory = broker_and_factory(clock, Limits(max_connections_per_address=2, memory_high=0))
    first, _second = Client(factory, port=1), Client(factory, port=2)
    third = Client(factory, port=3)
    error = third.error()
    assert error.get("message") == "too many connections from this address"
    assert b"max-connections-per-address" in error.body
    assert Client(factory, host="10.0.0.2").connect().command == "CONNECTED"
    first.send("DISCONNECT")
    assert first.closed
    assert Client(factory, port=4).connect().command == "CONNECTED"


def test_global_connection_limit_names_the_option() -> None:
    """The connection over max-connections gets "too many connections" and a close."""
    clock = Clock()
    _, factory = broker_and_factory(clock, Limits(max_connections=1, memory_high=0))
    Client(factory, port=1)
    error = Client(factory, host="10.0.0.9").error()
    assert error.get("message") == "too many connections"
    assert b"(max-connections)" in error.body


# -- per connection ---------------------------------------------------------------


def test_subscriptions_per_connection_are_limited() -> None:
    """The SUBSCRIBE over max-subscriptions gets an ERROR with its receipt-id; nothing stays."""
    clock = Clock()
    broker, factory = broker_and_factory(
        clock, config=SessionConfig(heartbeat=(0, 0), max_subscriptions=3)
    )
    client = Client(factory)
    client.connect()
    for number in range(3):
        client.send("SUBSCRIBE", ("id", str(number)), ("destination", f"/topic/t{number}"))
    client.send("SUBSCRIBE", ("id", "3"), ("destination", "/topic/t3"), ("receipt", "r3"))
    error = client.error()
    assert (error.get("message"), error.get("receipt-id")) == ("too many subscriptions", "r3")
    assert b"(max-subscriptions)" in error.body
    assert not list(broker.engine.topics.match("/topic/t0"))


def test_open_transactions_are_limited() -> None:
    """The BEGIN over max-transactions gets an ERROR naming the limit."""
    clock = Clock()
    _, factory = broker_and_factory(clock, Limits(max_transactions=2, memory_high=0))
    client = Client(factory)
    client.connect()
    client.send("BEGIN", ("transaction", "a"))
    client.send("BEGIN", ("transaction", "b"))
    client.send("BEGIN", ("transaction", "c"))
    error = client.error()
    assert error.get("message") == "too many transactions"
    assert b"(max-transactions)" in error.body


def test_frames_per_transaction_are_limited() -> None:
    """STOMP 1.2, "BEGIN": the SEND over max-transaction-frames in a transaction is an ERROR."""
    clock = Clock()
    broker, factory = broker_and_factory(clock, Limits(max_transaction_frames=2, memory_high=0))
    client = Client(factory)
    client.connect()
    client.send("BEGIN", ("transaction", "t"))
    for _ in range(3):
        client.send("SEND", ("destination", "/queue/q"), ("transaction", "t"))
    error = client.error()
    assert error.get("message") == "transaction too large"
    assert b"(max-transaction-frames)" in error.body
    assert "/queue/q" not in broker.engine.queues


# -- timeouts -----------------------------------------------------------------------


def test_socket_that_never_sends_connect_is_closed() -> None:
    """A client that sends no CONNECT within connect-timeout gets "connect timeout" and a close."""
    clock = Clock()
    broker, factory = broker_and_factory(clock)
    client = Client(factory)
    client.send_bytes(b"CONN")
    clock.advance(QUIET.connect_timeout - 0.1)
    assert not client.closed
    clock.advance(0.1)
    error = client.error()
    assert error.get("message") == "connect timeout"
    assert b"(connect-timeout)" in error.body
    assert broker.connections == set()
    assert clock.getDelayedCalls() == []


def test_connect_in_time_cancels_the_connect_timeout() -> None:
    """Once CONNECTED, the connect timeout is gone: nothing is scheduled for a quiet client."""
    clock = Clock()
    _, factory = broker_and_factory(clock)
    client = Client(factory)
    client.connect()
    assert clock.getDelayedCalls() == []
    clock.advance(QUIET.connect_timeout * 10)
    assert not client.closed


def test_content_length_longer_than_the_body_then_silence_hits_the_frame_timeout() -> None:
    """A frame begun and never finished (content-length larger than the body) hits frame-timeout."""
    clock = Clock()
    _, factory = broker_and_factory(clock, config=SessionConfig(heartbeat=(0, 0), frame_timeout=5))
    client = Client(factory)
    client.connect()
    client.send_bytes(b"SEND\ndestination:/topic/a\ncontent-length:1000\n\nonly this")
    clock.advance(4.9)
    client.send_bytes(b" and a bit more")
    assert not client.closed
    clock.advance(0.1)
    error = client.error()
    assert error.get("message") == "frame timeout"
    assert b"(frame-timeout)" in error.body
    assert clock.getDelayedCalls() == []


def test_frames_completed_in_time_never_hit_the_frame_timeout() -> None:
    """A frame completed within frame-timeout is handled; heart-beats alone start no clock."""
    clock = Clock()
    _, factory = broker_and_factory(clock, config=SessionConfig(heartbeat=(0, 0), frame_timeout=5))
    client = Client(factory)
    client.connect()
    for _ in range(3):
        client.send_bytes(b"SEND\ndestination:/topic/a\nreceipt:r\n\nhal")
        clock.advance(4)
        client.send_bytes(b"f\x00\n")
        assert [frame.command for frame in client.frames()] == ["RECEIPT"]
        clock.advance(4)
    client.send_bytes(b"\n\r\n")
    clock.advance(60)
    assert not client.closed


def test_paused_reading_suspends_the_client_s_clocks() -> None:
    """While the broker does not read a client, neither heart-beat nor frame timeout can end it."""
    clock = Clock()
    _, factory = broker_and_factory(
        clock, config=SessionConfig(heartbeat=(0, 1000), frame_timeout=5)
    )
    client = Client(factory)
    client.connect(("heart-beat", "1000,0"))
    client.send_bytes(b"SEND\ndestination:/topic/a\n\nhal")
    client.session.pause_reading()
    assert client.transport.producerState == "paused"
    clock.advance(30)
    assert not client.closed
    client.session.resume_reading()
    assert client.transport.producerState == "producing"
    clock.advance(1.9)
    assert not client.closed
    clock.advance(0.2)
    assert client.error().get("message") == "heart-beat timeout"


# -- graceful stop ------------------------------------------------------------------


def test_stop_tells_every_client_and_waits_for_them_to_close() -> None:
    """stopService sends each client ERROR "broker shutting down", and fires once all closed."""
    clock = Clock()
    broker, factory = broker_and_factory(clock)
    broker.startService()
    clients = [Client(factory, port=port) for port in (1, 2)]
    for client in clients:
        client.connect()
    stopped: list[Any] = []
    broker.stopService().addCallback(stopped.append)
    assert stopped == [None]
    for client in clients:
        assert client.error().get("message") == "broker shutting down"
    assert Client(factory, port=3).error().get("message") == "broker shutting down"
    assert clock.getDelayedCalls() == []


def test_stop_gives_up_on_clients_after_the_shutdown_timeout() -> None:
    """A client whose connection does not close is waited for shutdown-timeout seconds at most."""
    clock = Clock()
    broker, factory = broker_and_factory(clock, Limits(shutdown_timeout=3, memory_high=0))
    broker.startService()
    client = Client(factory)
    client.connect()
    # The transport will not close by itself: a client that does not read.
    client.transport.loseConnection = lambda: None  # type: ignore[method-assign]
    stopped: list[Any] = []
    broker.stopService().addCallback(stopped.append)
    assert [frame.command for frame in client.frames()] == ["ERROR"]
    clock.advance(2.9)
    assert stopped == []
    clock.advance(0.1)
    assert stopped == [None]


def test_stop_without_clients_is_immediate() -> None:
    """A broker without connections stops at once."""
    broker = Broker(Clock(), limits=NO_WATERMARK)
    broker.startService()
    stopped: list[Any] = []
    broker.stopService().addCallback(stopped.append)
    assert stopped == [None]


def test_closing_connection_is_dropped_if_the_client_does_not_take_its_last_bytes() -> None:
    """A connection asked to close is aborted after CLOSE_TIMEOUT if its buffer never drains."""
    clock = Clock()
    _, factory = broker_and_factory(clock)
    client = Client(factory)
    client.connect()
    client.transport.loseConnection = lambda: None  # type: ignore[method-assign]
    aborted: list[bool] = []
    client.transport.abortConnection = lambda: aborted.append(True)  # type: ignore[method-assign]
    client.send("DISCONNECT")
    clock.advance(CLOSE_TIMEOUT)
    assert aborted == [True]
    assert client.session.state is State.CLOSING


# -- options ------------------------------------------------------------------------


def test_limit_options_reach_the_broker_and_sessions() -> None:
    """Every limit is a twistd option with the documented default."""
    options = parse()
    assert options["max-connections"] == 10000
    assert options["max-connections-per-address"] == 0
    assert options["connect-timeout"] == 10.0 and options["frame-timeout"] == 60.0
    assert options["slow-consumer"] == "disconnect"
    assert options["slow-consumer-buffer"] == 8 * 1024 * 1024
    assert options["memory-low"] == 0 and options["memory-high"] > 0
    options = parse(
        "--max-connections-per-address",
        "7",
        "--max-subscriptions",
        "9",
        "--memory-high",
        "1G",
        "--memory-low",
        "512M",
        "--slow-consumer",
        "drop-oldest",
        "--slow-consumer-buffer",
        "64K",
        "--shutdown-timeout",
        "2.5",
    )
    assert (options["max-connections-per-address"], options["max-subscriptions"]) == (7, 9)
    assert (options["memory-high"], options["memory-low"]) == (1 << 30, 1 << 29)
    assert (options["slow-consumer"], options["slow-consumer-buffer"]) == ("drop-oldest", 65536)
    assert options["shutdown-timeout"] == 2.5


@pytest.mark.parametrize(
    "argv",
    [
        ["--slow-consumer", "ignore"],
        ["--slow-consumer-buffer", "0"],
        ["--memory-high", "lots"],
        ["--memory-high", "150%"],
        ["--memory-high", "1G", "--memory-low", "2G"],
        ["--connect-timeout", "-1"],
        ["--max-subscriptions", "-5"],
    ],
)
def test_bad_limit_options_are_usage_errors(argv: list[str]) -> None:
    """A limit option with a value it cannot use is a usage error, not a traceback."""
    with pytest.raises(usage.UsageError):
        parse(*argv)


@pytest.mark.parametrize(
    "text, expected",
    [("1024", 1024), ("64K", 65536), ("1.5M", 3 << 19), ("2GiB", 2 << 30), ("0", 0)],
)
def test_sizes_take_units(text: str, expected: int) -> None:
    """Sizes are bytes with an optional binary unit."""
    assert parse_size(text, "memory-high") == expected
