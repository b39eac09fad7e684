"""
The ``haproxy:`` listener: the STOMP connection is made once the PROXY header
is read, so that the session, the per-address limit and the logs see the client;
no header, or a bad one, drops the balancer's connection without a session.
"""

from __future__ import annotations

import socket
import struct

import pytest
from twisted.internet.address import IPv4Address
from twisted.internet.protocol import Protocol
from twisted.internet.task import Clock
from twisted.internet.testing import StringTransportWithDisconnection

from stompbroker.broker.flow.broker_limits import Limits
from stompbroker.broker.service import Broker
from stompbroker.protocol.parser import FrameParser
from stompbroker.protocol.session import SessionConfig
from stompbroker.transport.proxy_header import (
    HEADER_TIMEOUT,
    ProxyHeaderEndpoint,
    ProxyHeaderFactory,
    listening_endpoint,
)
from stompbroker.transport.tcp import stomp_server_factory

BALANCER = IPv4Address("TCP", "10.0.0.5", 41000)
CONNECT = b"CONNECT\naccept-version:1.2\nhost:/\n\n\x00"


def v2_header(source: str, port: int) -> bytes:
    """A PROXY protocol v2 header (haproxy's ``send-proxy-v2``) for a TCP over IPv4 client."""
    addresses = (
        socket.inet_aton(source) + socket.inet_aton("10.0.0.9") + struct.pack("!HH", port, 61613)
    )
    return b"\r\n\r\n\x00\r\nQUIT\n" + b"\x21\x11" + struct.pack("!H", len(addresses)) + addresses


class Balanced:
    """One connection from the balancer through the wrapper to the real TCP adapter."""

    def __init__(self, broker: Broker, clock: Clock) -> None:
        factory = ProxyHeaderFactory(stomp_server_factory(broker, clock, SessionConfig()), clock)
        self.wrapper = factory.buildProtocol(BALANCER)
        self.stomp = self.wrapper._pending.protocol
        self.transport = StringTransportWithDisconnection(peerAddress=BALANCER)
        self.transport.protocol = self.wrapper
        self.wrapper.makeConnection(self.transport)

    def frames(self) -> list[str]:
        return [frame.command for frame in FrameParser().receive_data(self.transport.value())]


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def broker(clock: Clock) -> Broker:
    return Broker(clock, limits=Limits(memory_high=0, max_connections_per_address=1))


def test_the_session_starts_with_the_clients_address(broker: Broker, clock: Clock) -> None:
    """No session before the header; then the session's peer is the client the header names."""
    connection = Balanced(broker, clock)
    assert connection.stomp.session is None
    connection.wrapper.dataReceived(v2_header("192.0.2.7", 5555) + CONNECT)
    assert connection.stomp.session.peer == "192.0.2.7:5555"
    assert connection.frames() == ["CONNECTED"]


def test_a_header_in_pieces_is_waited_for(broker: Broker, clock: Clock) -> None:
    """The header may come split over reads; what follows it goes to the session whole."""
    connection = Balanced(broker, clock)
    data = v2_header("192.0.2.7", 5555) + CONNECT
    for index in range(len(data)):
        connection.wrapper.dataReceived(data[index : index + 1])
    assert connection.frames() == ["CONNECTED"]


def test_the_per_address_limit_counts_the_client(broker: Broker, clock: Clock) -> None:
    """Two clients behind one balancer are two addresses; the same client twice is refused."""
    first, second, again = (Balanced(broker, clock) for _ in range(3))
    first.wrapper.dataReceived(v2_header("192.0.2.7", 1) + CONNECT)
    second.wrapper.dataReceived(v2_header("192.0.2.8", 1) + CONNECT)
    again.wrapper.dataReceived(v2_header("192.0.2.7", 2) + CONNECT)
    assert (first.frames(), second.frames()) == (["CONNECTED"], ["CONNECTED"])
    assert again.frames() == ["ERROR"]


def test_a_bad_header_drops_the_connection_without_a_session(broker: Broker, clock: Clock) -> None:
    """Bytes that are no PROXY header: the balancer's connection is closed, nobody admitted."""
    connection = Balanced(broker, clock)
    connection.wrapper.dataReceived(CONNECT + b"padding to sixteen")
    assert not connection.transport.connected
    assert connection.stomp.session is None
    assert not broker.connections


def test_no_header_in_time_drops_the_connection(broker: Broker, clock: Clock) -> None:
    """A balancer that sends nothing is dropped after HEADER_TIMEOUT seconds."""
    connection = Balanced(broker, clock)
    aborted: list[bool] = []
    connection.transport.abortConnection = lambda: aborted.append(True)  # type: ignore[method-assign]
    clock.advance(HEADER_TIMEOUT - 0.1)
    assert not aborted
    clock.advance(0.2)
    assert aborted


def test_a_header_cancels_the_deadline(broker: Broker, clock: Clock) -> None:
    connection = Balanced(broker, clock)
    connection.wrapper.dataReceived(v2_header("192.0.2.7", 5555))
    assert connection.wrapper._timeout is None
    assert connection.stomp.session is not None


def test_a_v1_header_works_too(broker: Broker, clock: Clock) -> None:
    """haproxy's ``send-proxy`` (text, v1) names the client as v2 does."""
    connection = Balanced(broker, clock)
    connection.wrapper.dataReceived(b"PROXY TCP4 192.0.2.7 10.0.0.9 5555 61613\r\n")
    connection.wrapper.dataReceived(CONNECT)
    assert connection.stomp.session.peer == "192.0.2.7:5555"


class Upgraded(Protocol):
    """What takes a connection over (as Autobahn's WebSocket resource does): records its reads."""

    def __init__(self) -> None:
        self.received: list[bytes] = []

    def dataReceived(self, data: bytes) -> None:
        self.received.append(data)


def test_a_protocol_that_takes_the_connection_over_gets_what_follows(
    broker: Broker, clock: Clock
) -> None:
    """
    Autobahn upgrades a web connection by replacing the wrapper's
    ``wrappedProtocol``: later reads go to the new protocol, not the first one.
    """
    connection = Balanced(broker, clock)
    connection.wrapper.dataReceived(v2_header("192.0.2.7", 5555))
    upgraded = Upgraded()
    connection.wrapper.wrappedProtocol = upgraded
    connection.wrapper.dataReceived(CONNECT)
    assert upgraded.received == [CONNECT]
    assert connection.frames() == []


def test_haproxy_descriptions_get_the_wrapper(clock: Clock) -> None:
    """``haproxy:tcp:PORT`` listens through the wrapper; anything else is as Twisted makes it."""
    assert isinstance(listening_endpoint(clock, "haproxy:tcp:0"), ProxyHeaderEndpoint)
    assert not isinstance(listening_endpoint(clock, "tcp:0"), ProxyHeaderEndpoint)
