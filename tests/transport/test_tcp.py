"""
Tests of the TCP adapter with ``StringTransport`` and ``task.Clock``: no sockets.
"""

from __future__ import annotations

from twisted.internet.address import IPv4Address
from twisted.internet.task import Clock
from twisted.internet.testing import StringTransportWithDisconnection

from stompbroker.broker.service import Broker
from stompbroker.protocol.parser import FrameParser
from stompbroker.protocol.session import SessionConfig
from stompbroker.transport.tcp import StompProtocol, stomp_server_factory


class NoDelayTransport(StringTransportWithDisconnection):
    """A string transport that records TCP_NODELAY."""

    nodelay = False

    def setTcpNoDelay(self, enabled: bool) -> None:
        self.nodelay = enabled


def open_connection(factory, port: int = 40000):
    protocol = factory.buildProtocol(IPv4Address("TCP", "127.0.0.1", port))
    transport = NoDelayTransport(peerAddress=IPv4Address("TCP", "127.0.0.1", port))
    transport.protocol = protocol
    protocol.makeConnection(transport)
    return protocol, transport


def read(transport) -> list:
    data = transport.value()
    transport.clear()
    return FrameParser().receive_data(data)


def test_connection_feeds_session_and_sets_nodelay() -> None:
    """Bytes in reach the session; frames out reach the transport; TCP_NODELAY is on."""
    clock = Clock()
    broker = Broker(clock)
    factory = stomp_server_factory(broker, clock, SessionConfig(heartbeat=(0, 0)))
    protocol, transport = open_connection(factory)
    assert isinstance(protocol, StompProtocol)
    assert transport.nodelay
    protocol.dataReceived(b"CONNECT\naccept-version:1.2\n\n\x00")
    [connected] = read(transport)
    assert connected.command == "CONNECTED"
    assert protocol.session.peer == "127.0.0.1:40000"


def test_two_connections_share_one_broker() -> None:
    """A SEND on one connection is delivered on another through the shared broker."""
    clock = Clock()
    broker = Broker(clock)
    factory = stomp_server_factory(broker, clock)
    subscriber, sub_transport = open_connection(factory, 1)
    publisher, pub_transport = open_connection(factory, 2)
    subscriber.dataReceived(
        b"CONNECT\naccept-version:1.2\n\n\x00SUBSCRIBE\nid:0\ndestination:/topic/a\n\n\x00"
    )
    publisher.dataReceived(b"CONNECT\naccept-version:1.2\n\n\x00SEND\ndestination:/topic/a\n\nhi\x00")
    frames = read(sub_transport)
    assert [f.command for f in frames] == ["CONNECTED", "MESSAGE"]
    assert frames[1].body == b"hi"


def test_disconnect_closes_after_receipt_and_releases_subscriptions() -> None:
    """DISCONNECT writes the RECEIPT and asks the transport to close; the broker forgets the client."""
    clock = Clock()
    broker = Broker(clock)
    protocol, transport = open_connection(stomp_server_factory(broker, clock))
    protocol.dataReceived(
        b"CONNECT\naccept-version:1.2\n\n\x00SUBSCRIBE\nid:0\ndestination:/topic/a\n\n\x00"
        b"DISCONNECT\nreceipt:1\n\n\x00"
    )
    assert [f.command for f in read(transport)] == ["CONNECTED", "RECEIPT"]
    assert not transport.connected
    assert len(broker.topics) == 0
    assert broker.connections == set()


def test_lost_connection_releases_everything() -> None:
    """A connection lost mid-frame leaves no subscription and no timer behind."""
    clock = Clock()
    broker = Broker(clock)
    protocol, transport = open_connection(stomp_server_factory(broker, clock))
    protocol.dataReceived(
        b"CONNECT\naccept-version:1.2\nheart-beat:1000,1000\n\n\x00"
        b"SUBSCRIBE\nid:0\ndestination:/topic/#\n\n\x00SEND\ndestination:/topic/a\n\nhal"
    )
    transport.loseConnection()
    assert len(broker.topics) == 0
    assert broker.connections == set()
    assert clock.getDelayedCalls() == []
