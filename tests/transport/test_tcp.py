"""
Tests of the TCP adapter with ``StringTransport`` and ``task.Clock``: no sockets.
"""

from __future__ import annotations

from typing import Any

from twisted.internet.task import Clock
from twisted.internet.testing import StringTransportWithDisconnection

from stompbroker.broker.service import Broker
from stompbroker.protocol.session import SessionConfig
from stompbroker.transport.tcp import StompProtocol, stomp_server_factory
from tests.support.tcp import Client


class NoDelayTransport(StringTransportWithDisconnection):
    """A string transport that records TCP_NODELAY."""

    nodelay = False

    def setTcpNoDelay(self, enabled: bool) -> None:
        self.nodelay = enabled


def connection(broker: Broker, clock: Clock, port: int = 40000, **config: Any) -> Client:
    """:returns: a connection through the TCP adapter, on a transport that records TCP_NODELAY."""
    factory = stomp_server_factory(broker, clock, SessionConfig(**config))
    return Client(factory, port=port, transport_type=NoDelayTransport)


def test_connection_feeds_session_and_sets_nodelay(clock: Clock, broker: Broker) -> None:
    """Bytes in reach the session; frames out reach the transport; TCP_NODELAY is on."""
    client = connection(broker, clock, heartbeat=(0, 0))
    assert isinstance(client.protocol, StompProtocol)
    assert client.transport.nodelay
    client.send_bytes(b"CONNECT\naccept-version:1.2\n\n\x00")
    [connected] = client.frames()
    assert connected.command == "CONNECTED"
    assert client.session.peer == "127.0.0.1:40000"


def test_two_connections_share_one_broker(clock: Clock, broker: Broker) -> None:
    """A SEND on one connection is delivered on another through the shared broker."""
    subscriber, publisher = connection(broker, clock, 1), connection(broker, clock, 2)
    subscriber.send_bytes(
        b"CONNECT\naccept-version:1.2\n\n\x00SUBSCRIBE\nid:0\ndestination:/topic/a\n\n\x00"
    )
    publisher.send_bytes(b"CONNECT\naccept-version:1.2\n\n\x00SEND\ndestination:/topic/a\n\nhi\x00")
    frames = subscriber.frames()
    assert [f.command for f in frames] == ["CONNECTED", "MESSAGE"]
    assert frames[1].body == b"hi"


def test_disconnect_closes_after_receipt_and_releases_subscriptions(
    clock: Clock, broker: Broker
) -> None:
    """
    DISCONNECT writes the RECEIPT and asks the transport to close; the broker forgets the client.
    """
    client = connection(broker, clock)
    client.send_bytes(
        b"CONNECT\naccept-version:1.2\n\n\x00SUBSCRIBE\nid:0\ndestination:/topic/a\n\n\x00"
        b"DISCONNECT\nreceipt:1\n\n\x00"
    )
    assert [f.command for f in client.frames()] == ["CONNECTED", "RECEIPT"]
    assert client.closed
    assert len(broker.engine.topics) == 0
    assert broker.connections == set()


def test_lost_connection_releases_everything(clock: Clock, broker: Broker) -> None:
    """A connection lost mid-frame leaves no subscription and no timer behind."""
    client = connection(broker, clock)
    client.send_bytes(
        b"CONNECT\naccept-version:1.2\nheart-beat:1000,1000\n\n\x00"
        b"SUBSCRIBE\nid:0\ndestination:/topic/#\n\n\x00SEND\ndestination:/topic/a\n\nhal"
    )
    client.transport.loseConnection()
    assert len(broker.engine.topics) == 0
    assert broker.connections == set()
    assert clock.getDelayedCalls() == []


def test_a_1_0_client_writing_blanks_after_the_colon_is_understood(
    clock: Clock, broker: Broker
) -> None:
    """
    STOMP 1.0 headers written ``name: value`` (Perl's POE::Filter::Stomp) are read trimmed, as
    RabbitMQ and ActiveMQ read them: the SEND reaches the queue, its user header arrives trimmed.
    """
    consumer, producer = connection(broker, clock, 1), connection(broker, clock, 2)
    consumer.send_bytes(b"CONNECT\nlogin: guest\n\n\x00SUBSCRIBE\ndestination: /queue/a\n\n\x00")
    producer.send_bytes(
        b"CONNECT\n\n\x00SEND\ndestination: /queue/a\nreceipt: r1\nnote : hello \n\nhi\x00"
    )
    assert [(f.command, f.get("receipt-id")) for f in producer.frames()] == [
        ("CONNECTED", None),
        ("RECEIPT", "r1"),
    ]
    frames = consumer.frames()
    assert [f.command for f in frames] == ["CONNECTED", "MESSAGE"]
    assert (frames[1].get("destination"), frames[1].get("note"), frames[1].body) == (
        "/queue/a",
        "hello",
        b"hi",
    )
