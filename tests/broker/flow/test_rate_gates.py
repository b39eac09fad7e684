"""
Rate limits applied, through the real TCP adapter, session and broker on a
string transport and ``task.Clock``: a fast client is slowed (its transport
paused) and resumed once back at its rate, closed with an ERROR naming the
limit when it stays over, a user's connections share its rates, and new
connections from one address are counted.
"""

from __future__ import annotations

from typing import Any

import pytest
from twisted.cred import strcred
from twisted.internet.task import Clock

from stompbroker.broker.flow.rate_limits import Rate, RateLimits, Rates
from stompbroker.broker.service import Broker
from stompbroker.protocol.session import SessionConfig
from stompbroker.security.portal import Authenticator, make_portal
from stompbroker.transport.tcp import stomp_server_factory
from tests.support.tcp import NO_WATERMARK, Client

CONNECT = b"CONNECT\naccept-version:1.2\nhost:/\nlogin:alice\npasscode:secret\n\n\x00"


def send(count: int) -> bytes:
    return b"SEND\ndestination:/topic/t\n\nx\x00" * count


def broker_and_factory(clock: Clock, limits: RateLimits, auth: bool = False) -> tuple[Broker, Any]:
    broker = Broker(clock, limits=NO_WATERMARK, rate_limits=limits)
    authenticator = None
    if auth:
        checker = strcred.makeChecker("memory:alice:secret")
        authenticator = Authenticator(make_portal([checker]), clock, 0.0)
    return broker, stomp_server_factory(broker, clock, SessionConfig(authenticator=authenticator))


def paused(client: Client) -> bool:
    return client.transport.producerState == "paused"


@pytest.fixture
def clock() -> Clock:
    clock = Clock()
    clock.advance(1000)
    return clock


def test_without_limits_connections_read_through_no_gate(clock: Clock) -> None:
    """No rate limit: the session reads the transport's bytes directly."""
    broker, factory = broker_and_factory(clock, RateLimits())
    client = Client(factory)
    assert client.protocol._gate is None
    assert broker.rates.figures() is None


def test_a_fast_publisher_is_slowed_then_read_again(clock: Clock) -> None:
    """Over its message rate, reading pauses until the debt is paid, then resumes."""
    broker, factory = broker_and_factory(clock, RateLimits(connection=Rates(messages=Rate(10, 10))))
    client = Client(factory)
    client.send_bytes(CONNECT + send(15))
    assert paused(client)
    assert broker.rates.figures().to_dict() == {
        "slowed": 1,
        "slowed_total": 1,
        "disconnected": 0,
        "refused": 0,
    }
    clock.advance(0.49)
    assert paused(client)
    clock.advance(0.02)
    assert not paused(client)
    assert broker.rates.figures().slowed == 0
    assert not client.closed


def numbered(first: int, count: int) -> bytes:
    """:returns: ``count`` SENDs to /topic/t whose bodies number them from ``first``."""
    return b"".join(
        b"SEND\ndestination:/topic/t\n\n%d\x00" % number for number in range(first, first + count)
    )


def handled(client: Client) -> int:
    """:returns: the SENDs the client's session has handled."""
    return int(client.protocol.session.messages_received)


def test_the_burst_is_held_per_send_within_one_read(clock: Clock) -> None:
    """
    496 SENDs in one read against a burst of 50: the session handles 50 and the
    one that goes over, the rest is kept unread until the tokens come, in order.
    """
    broker, factory = broker_and_factory(clock, RateLimits(connection=Rates(messages=Rate(10, 50))))
    watcher = Client(factory, port=40001)
    watcher.connect()
    watcher.send("SUBSCRIBE", ("id", "0"), ("destination", "/topic/t"))
    client = Client(factory)
    client.send_bytes(CONNECT + numbered(0, 496))
    assert handled(client) == 51
    assert paused(client)
    clock.advance(1.0)
    assert handled(client) == 61
    clock.pump([0.1] * 450)
    assert handled(client) == 496
    bodies = [frame.body for frame in watcher.frames() if frame.command == "MESSAGE"]
    assert bodies == [b"%d" % number for number in range(496)]


def test_what_comes_while_paused_waits_behind_what_was_kept(clock: Clock) -> None:
    """
    Reads handed over while reading is paused (a WebSocket adapter's messages of
    one socket read) are kept too, behind the rest: nothing handled before its turn.
    """
    broker, factory = broker_and_factory(clock, RateLimits(connection=Rates(messages=Rate(10, 5))))
    client = Client(factory)
    client.send_bytes(CONNECT + numbered(0, 10))
    for number in range(10, 20):
        client.send_bytes(numbered(number, 1))
    assert handled(client) == 6
    clock.pump([0.1] * 20)
    assert handled(client) == 20
    assert not paused(client)


def test_a_read_within_the_tokens_is_handed_over_whole(clock: Clock) -> None:
    """Below the burst nothing is split: the read is handled, charged once, and reading goes on."""
    broker, factory = broker_and_factory(clock, RateLimits(connection=Rates(messages=Rate(10, 50))))
    client = Client(factory)
    client.send_bytes(CONNECT + numbered(0, 40))
    assert handled(client) == 40
    assert not paused(client)


def test_the_byte_rate_counts_every_frame(clock: Clock) -> None:
    """The byte limit counts what was read, SEND or not."""
    broker, factory = broker_and_factory(clock, RateLimits(connection=Rates(bytes=Rate(100))))
    client = Client(factory)
    client.send_bytes(CONNECT + b"SUBSCRIBE\nid:0\ndestination:/topic/" + b"a" * 100 + b"\n\n\x00")
    assert paused(client)


def test_a_client_that_slows_down_is_no_longer_over(clock: Clock) -> None:
    """A chunk within the rate ends the time over, so the over-time limit starts afresh."""
    broker, factory = broker_and_factory(
        clock, RateLimits(connection=Rates(messages=Rate(10, 10)), over_time=2.0)
    )
    client = Client(factory)
    client.send_bytes(CONNECT + send(11))
    clock.advance(1.0)
    client.send_bytes(send(1))
    clock.advance(1.5)
    client.send_bytes(send(11))
    clock.advance(1.5)
    client.send_bytes(send(11))
    assert not client.closed
    assert broker.rates.figures().disconnected == 0


def test_a_client_kept_over_its_rate_gets_an_error_naming_the_limit(clock: Clock) -> None:
    """Still over after over_time seconds of being slowed: an ERROR, then the close."""
    broker, factory = broker_and_factory(
        clock, RateLimits(connection=Rates(messages=Rate(10, 10)), over_time=1.0)
    )
    client = Client(factory)
    client.send_bytes(CONNECT + send(20))
    for _ in range(3):
        clock.advance(1.0)
        client.send_bytes(send(20))
    errors = [frame for frame in client.frames() if frame.command == "ERROR"]
    assert [error.get("message") for error in errors] == ["rate limit exceeded"]
    assert "rate-limit-messages" in errors[0].body.decode()
    assert "rate-limit-over-time" in errors[0].body.decode()
    assert client.closed
    figures = broker.rates.figures()
    assert (figures.disconnected, figures.slowed) == (1, 0)


def test_a_user_shares_its_rate_across_its_connections(clock: Clock) -> None:
    """Two connections of one login draw on one bucket: the second is slowed by the first's use."""
    broker, factory = broker_and_factory(
        clock, RateLimits(user=Rates(messages=Rate(10, 10))), auth=True
    )
    first, second = Client(factory, port=1), Client(factory, port=2)
    first.send_bytes(CONNECT)
    second.send_bytes(CONNECT)
    first.send_bytes(send(8))
    assert not paused(first)
    second.send_bytes(send(8))
    assert paused(second) and not paused(first)
    first.transport.loseConnection()
    second.transport.loseConnection()
    assert broker.rates._users == {}


def test_a_login_in_the_table_gets_its_own_rates(clock: Clock) -> None:
    """The per-user table's rates replace the connection's once the client has logged in."""
    limits = RateLimits(
        connection=Rates(messages=Rate(1, 1)),
        per_user={"alice": (Rates(messages=Rate(100, 100)), Rates())},
    )
    _, factory = broker_and_factory(clock, limits, auth=True)
    client = Client(factory)
    client.send_bytes(CONNECT)
    client.send_bytes(send(50))
    assert not paused(client)


def test_new_connections_per_address_are_limited(clock: Clock) -> None:
    """Past the connection rate, a new connection from that address gets an ERROR naming it."""
    broker, factory = broker_and_factory(clock, RateLimits(connection_rate=Rate(1, 2)))
    admitted = [Client(factory, host="10.0.0.1", port=port) for port in (1, 2)]
    refused = Client(factory, host="10.0.0.1", port=3)
    other = Client(factory, host="10.0.0.2", port=4)
    assert not any(client.closed for client in admitted) and not other.closed
    assert refused.closed
    [error] = refused.frames()
    assert error.get("message") == "too many new connections from this address"
    assert "max-connection-rate" in error.body.decode()
    assert broker.rates.figures().refused == 1
    clock.advance(1.0)
    assert not Client(factory, host="10.0.0.1", port=5).closed


def test_addresses_whose_bucket_filled_again_are_forgotten(clock: Clock) -> None:
    """The table of addresses does not grow without bound: full buckets are swept."""
    broker, _ = broker_and_factory(clock, RateLimits(connection_rate=Rate(1)))
    rates = broker.rates
    for index in range(1024):
        rates.admit(f"10.0.{index // 256}.{index % 256}")
    clock.advance(5)
    rates.admit("10.9.9.9")
    assert list(rates._addresses) == ["10.9.9.9"]


def test_one_read_worth_more_than_the_over_time_is_caught(clock: Clock) -> None:
    """A debt longer than over_time is looked at again when that time is up: the ERROR then."""
    broker, factory = broker_and_factory(
        clock, RateLimits(connection=Rates(messages=Rate(10, 10)), over_time=2.0)
    )
    client = Client(factory)
    client.send_bytes(CONNECT + send(100))
    clock.advance(1.9)
    assert not client.closed
    clock.advance(0.2)
    assert client.closed
    assert [frame.command for frame in client.frames()][-1] == "ERROR"
    assert broker.rates.figures().disconnected == 1
