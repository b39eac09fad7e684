"""
Writes gathered while a read is handled, one transport write per connection
(``stompbroker.transport.coalesce``), over the TCP adapter with string transports.
"""

from __future__ import annotations

from twisted.internet.address import IPv4Address
from twisted.internet.task import Clock
from twisted.internet.testing import StringTransportWithDisconnection

from stompbroker.broker.service import Broker
from stompbroker.protocol.parser import FrameParser
from stompbroker.protocol.session import SessionConfig
from stompbroker.transport.coalesce import CoalescedWrite, WriteCoalescer
from stompbroker.transport.tcp import stomp_server_factory

CONNECT = b"CONNECT\naccept-version:1.2\n\n\x00"


class CountingTransport(StringTransportWithDisconnection):
    """A string transport that counts the calls to ``write``."""

    writes = 0

    def write(self, data: bytes) -> None:
        self.writes += 1
        super().write(data)


def open_connection(factory, port: int):
    protocol = factory.buildProtocol(IPv4Address("TCP", "127.0.0.1", port))
    transport = CountingTransport(peerAddress=IPv4Address("TCP", "127.0.0.1", port))
    transport.protocol = protocol
    protocol.makeConnection(transport)
    protocol.dataReceived(CONNECT)
    transport.clear()
    transport.writes = 0
    return protocol, transport


def frames(transport) -> list:
    return FrameParser().receive_data(transport.value())


def test_gathered_writes_go_out_once_in_order_when_the_read_ends() -> None:
    """Inside a read the writes wait; at its end each writer's bytes are joined in order."""
    coalescer = WriteCoalescer()
    written: list[bytes] = []
    writer = CoalescedWrite(written.append, coalescer)

    def receive(data: bytes) -> None:
        for part in data.split(b","):
            writer(part)
        assert written == []

    coalescer.handle(receive, b"a,b,c")
    assert written == [b"abc"]


def test_a_write_outside_a_read_goes_straight_out() -> None:
    """Timers and the embedding API write when no read is handled: nothing waits."""
    written: list[bytes] = []
    writer = CoalescedWrite(written.append, WriteCoalescer())
    writer(b"heart-beat")
    assert written == [b"heart-beat"]


def test_a_nested_read_leaves_the_flush_to_the_outer_one() -> None:
    """Only the outermost read writes out, once."""
    coalescer = WriteCoalescer()
    written: list[bytes] = []
    writer = CoalescedWrite(written.append, coalescer)

    def inner(data: bytes) -> None:
        writer(data)

    def outer(data: bytes) -> None:
        writer(data)
        coalescer.handle(inner, b"2")
        assert written == []

    coalescer.handle(outer, b"1")
    assert written == [b"12"]


def test_fan_out_of_one_read_is_one_write_per_subscriber() -> None:
    """Fifty SENDs in one read reach each subscriber in one transport write, in order."""
    clock = Clock()
    factory = stomp_server_factory(Broker(clock), clock, SessionConfig(heartbeat=(0, 0)))
    subscribers = [open_connection(factory, port) for port in (1, 2)]
    for number, (protocol, _) in enumerate(subscribers):
        protocol.dataReceived(b"SUBSCRIBE\nid:%d\ndestination:/topic/t\n\n\x00" % number)
    publisher, publisher_transport = open_connection(factory, 3)
    publisher.dataReceived(
        b"".join(b"SEND\ndestination:/topic/t\n\n%d\x00" % n for n in range(50))
        + b"SEND\ndestination:/topic/t\nreceipt:r\n\nend\x00"
    )
    for _, transport in subscribers:
        assert transport.writes == 1
        assert [frame.body for frame in frames(transport)] == [b"%d" % n for n in range(50)] + [
            b"end"
        ]
    assert publisher_transport.writes == 1
    assert [frame.command for frame in frames(publisher_transport)] == ["RECEIPT"]


def test_the_reading_connection_is_written_first() -> None:
    """A publisher's RECEIPT leaves before the fan-out its SEND made, so it can send on sooner."""
    coalescer = WriteCoalescer()
    order: list[str] = []
    subscriber = CoalescedWrite(lambda data: order.append("subscriber"), coalescer)
    publisher = CoalescedWrite(lambda data: order.append("publisher"), coalescer)

    def receive(data: bytes) -> None:
        subscriber(b"MESSAGE")
        publisher(b"RECEIPT")

    coalescer.handle(receive, b"SEND", reader=publisher)
    assert order == ["publisher", "subscriber"]


def test_an_error_follows_what_the_same_read_answered_and_then_closes() -> None:
    """
    A RECEIPT answered earlier in the read goes out before the ERROR, then the connection closes.
    """
    clock = Clock()
    factory = stomp_server_factory(Broker(clock), clock, SessionConfig(heartbeat=(0, 0)))
    protocol, transport = open_connection(factory, 4)
    protocol.dataReceived(b"SEND\ndestination:/queue/q\nreceipt:ok\n\nx\x00FROB\n\n\x00")
    assert [frame.command for frame in frames(transport)] == ["RECEIPT", "ERROR"]
    assert not transport.connected


def test_publishing_from_the_application_writes_at_once() -> None:
    """
    Broker.publish outside any read (the embedding API) is on the subscriber's transport right away.
    """
    clock = Clock()
    broker = Broker(clock)
    factory = stomp_server_factory(broker, clock, SessionConfig(heartbeat=(0, 0)))
    protocol, transport = open_connection(factory, 5)
    protocol.dataReceived(b"SUBSCRIBE\nid:0\ndestination:/topic/app\n\n\x00")
    transport.clear()
    broker.publish("/topic/app", b"from the application")
    assert [frame.body for frame in frames(transport)] == [b"from the application"]
