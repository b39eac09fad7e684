"""
Tests of back-pressure without sockets: slow consumers, the slow-consumer policies, the
memory watermark, and the pieces they are made of.

The transports are ``StringTransport``s, which never fill: a test plays the
transport's part by calling the protocol's ``pauseProducing`` (the socket's
buffer passed its mark) and ``resumeProducing`` (it drained), as Twisted's TCP
transport does for a registered streaming producer.
"""

from __future__ import annotations

from typing import Any

import pytest
from twisted.internet.address import IPv4Address
from twisted.internet.task import Clock
from twisted.internet.testing import StringTransport, StringTransportWithDisconnection

from stompbroker.broker.flow.publisher_pauses import (
    MEMORY,
    MemoryWatch,
    Throttle,
    allocated_bound,
    allocated_bytes_with,
    memory_gauge,
)
from stompbroker.broker.queueing.delivery import Consumer
from stompbroker.broker.service import Broker, Limits
from stompbroker.protocol.advisory import ADVISORY_HEADER
from stompbroker.protocol.backlog import Backlog
from stompbroker.protocol.session import SessionConfig
from stompbroker.transport.session_link import WriteProducer
from stompbroker.transport.tcp import stomp_server_factory
from stompbroker.transport.websocket import StompWebSocketProtocol
from stompbroker.web.site import WebSite, web_root
from tests.support import websocket as ws
from tests.support.broker import Inbox
from tests.support.tcp import NO_WATERMARK, Client

#: Room for ten 100-byte messages, about; no heart-beats.
SMALL_BUFFER = 1024


def world(
    policy: str = "disconnect", buffer: int = SMALL_BUFFER, limits: Limits = NO_WATERMARK
) -> tuple[Clock, Broker, Any]:
    clock = Clock()
    broker = Broker(clock, limits=limits)
    # No grace: a transport that says it is full means behind at once.
    config = SessionConfig(
        heartbeat=(0, 0), slow_consumer_policy=policy, slow_consumer_buffer=buffer, write_grace=0
    )
    return clock, broker, stomp_server_factory(broker, clock, config)


def subscribed(
    factory: Any,
    destination: str = "/topic/a",
    port: int = 1,
    transport_type: type[StringTransportWithDisconnection] = StringTransportWithDisconnection,
    **headers: str,
) -> Client:
    client = Client(factory, port=port, transport_type=transport_type)
    client.connect()
    client.send("SUBSCRIBE", ("id", "0"), ("destination", destination), *headers.items())
    return client


def publish(publisher: Client, count: int, destination: str = "/topic/a", start: int = 0) -> None:
    for number in range(start, start + count):
        publisher.send("SEND", ("destination", destination), body=b"%06d" % number + b"." * 94)


def bodies(client: Client) -> list[int]:
    """:returns: the numbers of the messages received, advisories aside."""
    return [
        int(frame.body[:6])
        for frame in client.frames()
        if frame.command == "MESSAGE" and frame.get(ADVISORY_HEADER) is None
    ]


# -- the pieces -----------------------------------------------------------------------


def test_backlog_keeps_order_and_drops_only_topic_messages() -> None:
    """Dropping the oldest removes topic messages only; what stays comes out in write order."""
    backlog = Backlog()
    backlog.keep_message(b"m1")
    backlog.keep(b"receipt")
    backlog.keep_message(b"m2")
    assert backlog.keep_message(b"m3") == 6
    assert backlog.drop_oldest(4) == 1
    assert (len(backlog), backlog.message_bytes, backlog.other_bytes) == (3, 4, 7)
    assert list(backlog.drain()) == [b"receipt", b"m2", b"m3"]
    assert (len(backlog), backlog.message_bytes, backlog.other_bytes) == (0, 0, 0)


def test_backlog_drained_in_part_keeps_the_rest() -> None:
    """A caller that stops draining (the transport filled again) leaves the rest, in order."""
    backlog = Backlog()
    for data in (b"a", b"b", b"c"):
        backlog.keep_message(data)
    drain = backlog.drain()
    assert next(drain) == b"a"
    del drain
    assert list(backlog.drain()) == [b"b", b"c"]


def test_backlog_of_a_client_that_never_reads_stays_small() -> None:
    """Dropped messages leave no trace: the backlog of a dropping client does not grow."""
    backlog = Backlog()
    for number in range(10000):
        backlog.keep_message(b"%d" % number)
        backlog.drop_oldest(4)
    assert len(backlog._entries) < 200
    assert list(backlog.drain()) == [b"9999"]


class Reader:
    """A connection that records whether it is read from."""

    def __init__(self) -> None:
        self.paused = 0

    def pause_reading(self) -> None:
        self.paused += 1

    def resume_reading(self) -> None:
        self.paused -= 1


def test_throttle_resumes_a_publisher_once_no_reason_is_left() -> None:
    """A publisher held for memory and for a slow subscriber reads again only when both are gone."""
    throttle, publisher, slow = Throttle(), Reader(), object()
    throttle.hold(publisher, MEMORY)
    throttle.hold(publisher, slow)
    assert publisher.paused == 1 and publisher in throttle
    throttle.release(MEMORY)
    assert publisher.paused == 1
    throttle.forget(slow)
    assert publisher.paused == 0 and len(throttle) == 0


def test_memory_watch_crosses_high_then_low() -> None:
    """The watermark reports memory over the high mark once, and under the low mark once."""
    clock, used, events = Clock(), [10], []
    watch = MemoryWatch(clock, lambda: used[0], 100, 50, events.append, events.append, interval=1)
    watch.start()
    used[0] = 150
    clock.advance(1)
    clock.advance(1)
    used[0] = 70
    clock.advance(1)
    used[0] = 40
    clock.advance(1)
    assert events == [150, 40] and not watch.over
    watch.stop()
    assert clock.getDelayedCalls() == []


def test_memory_watch_reads_the_gauge_only_when_its_bound_is_over_high() -> None:
    """
    The cheap bound spares the allocator walk while memory is clearly under the
    mark; over it, and until memory is under the low mark again, the gauge decides.
    """
    clock, used, rough, events, reads = Clock(), [10], [20], [], []

    def gauge() -> int:
        reads.append(used[0])
        return used[0]

    watch = MemoryWatch(
        clock, gauge, 100, 50, events.append, events.append, interval=1, bound=lambda: rough[0]
    )
    watch.start()
    clock.advance(1)
    assert reads == [] and watch.last == 20
    rough[0], used[0] = 120, 90
    clock.advance(1)
    assert reads == [90] and events == [] and not watch.over
    used[0] = 130
    clock.advance(1)
    assert events == [130] and watch.over
    rough[0], used[0] = 60, 40
    clock.advance(1)
    assert reads == [90, 130, 40] and events == [130, 40] and not watch.over
    clock.advance(1)
    assert reads == [90, 130, 40]
    watch.stop()
    assert clock.getDelayedCalls() == []


def test_the_bound_is_never_below_the_allocated_gauge() -> None:
    """RAM and swap in use, with pymalloc's estimate on top, is above what malloc handed out."""
    gauge, kind = memory_gauge()
    if kind != "allocated":
        pytest.skip(f"no glibc mallinfo2 here (the gauge is {kind!r})")
    assert gauge is not None
    held = [bytes(range(256)) * 4096 for _ in range(64)]
    assert allocated_bound() >= gauge() > len(held) * 4096 * 256


def test_allocated_bytes_counts_malloc_and_pymalloc() -> None:
    """The gauge adds what malloc hands out, in heap and mmapped chunks, to pymalloc's blocks."""

    class Info:
        uordblks = 1000
        hblkhd = 2000

    assert allocated_bytes_with(lambda: Info())() >= 3000  # type: ignore[arg-type,return-value]


def test_paused_consumer_has_no_room() -> None:
    """Consumer.has_room is false while its connection is behind, whatever its window."""
    consumer = Consumer(Inbox(ack_mode="auto"), queue=None, window=10, max_redeliveries=-1)
    assert consumer.has_room()
    consumer.paused = True
    assert not consumer.has_room()


# -- a slow subscriber ------------------------------------------------------------------


def slow_and_quick(
    policy: str = "disconnect",
    buffer: int = SMALL_BUFFER,
    transport_type: type[StringTransportWithDisconnection] = StringTransportWithDisconnection,
) -> tuple[Clock, Broker, Client, Client, Client]:
    """
    Two subscribers to /topic/a, the first behind from now on, and a publisher.

    :param transport_type: the string transport of the first subscriber.
    """
    clock, broker, factory = world(policy, buffer)
    slow = subscribed(factory, port=1, transport_type=transport_type)
    quick = subscribed(factory, port=2)
    publisher = Client(factory, port=3)
    publisher.connect()
    slow.frames(), quick.frames()
    slow.transport.producer.pauseProducing()
    return clock, broker, slow, quick, publisher


def test_session_is_its_transports_streaming_producer() -> None:
    """The TCP adapter registers a push producer of its session's writes with its transport."""
    _, _, factory = world()
    client = Client(factory)
    producer = client.transport.producer
    assert producer == WriteProducer(
        client.protocol.session.pause_writing, client.protocol.session.resume_writing
    )
    assert client.transport.streaming


def test_topic_messages_wait_while_the_socket_is_full_and_follow_in_order() -> None:
    """Nothing is written to a full transport; once it drains, everything follows, in order."""
    _, _, subscriber, _, publisher = slow_and_quick(buffer=1 << 20)
    publish(publisher, 50)
    subscriber.send("SUBSCRIBE", ("id", "1"), ("destination", "/topic/b"), ("receipt", "r"))
    assert subscriber.transport.value() == b""
    subscriber.transport.producer.resumeProducing()
    frames = subscriber.frames()
    assert [int(frame.body[:6]) for frame in frames[:-1]] == list(range(50))
    assert frames[-1].command == "RECEIPT"


def test_a_burst_within_the_grace_goes_straight_to_the_transport() -> None:
    """A transport full for a burst is still written to, up to write_grace; then the slow path."""
    clock = Clock()
    broker = Broker(clock, limits=NO_WATERMARK)
    config = SessionConfig(heartbeat=(0, 0), write_grace=2000, slow_consumer_buffer=1 << 20)
    factory = stomp_server_factory(broker, clock, config)
    subscriber = subscribed(factory)
    publisher = Client(factory, port=2)
    publisher.connect()
    subscriber.frames()
    subscriber.transport.producer.pauseProducing()
    publish(publisher, 10)
    assert len(bodies(subscriber)) == 10
    assert (
        subscriber.session.output.backlog.grace < 2000
        and not subscriber.session.output.backlog.active
    )
    publish(publisher, 20, start=10)
    assert subscriber.session.output.backlog.active
    written = bodies(subscriber)
    subscriber.transport.producer.resumeProducing()
    assert written + bodies(subscriber) == list(range(10, 30))


class FillingTransport(StringTransportWithDisconnection):
    """A transport that fills (pauses its producer) at the third write once it is watched."""

    #: What was written since it was watched; ``None``: not watched.
    written: list[bytes] | None = None

    def write(self, data: bytes) -> None:
        super().write(data)
        written = self.written
        if written is not None:
            written.append(data)
            if len(written) == 3:
                self.producer.pauseProducing()


def test_flush_stops_when_the_transport_fills_again() -> None:
    """A transport that fills while the backlog is sent stops the flush; the rest waits its turn."""
    _, _, subscriber, _, publisher = slow_and_quick(buffer=1 << 20, transport_type=FillingTransport)
    publish(publisher, 10)
    written: list[bytes] = []
    subscriber.transport.written = written  # type: ignore[attr-defined]
    subscriber.transport.producer.resumeProducing()
    assert len(written) == 3
    subscriber.transport.producer.resumeProducing()
    assert len(written) == 10


def test_queue_messages_wait_in_the_queue_for_a_slow_consumer() -> None:
    """A consumer whose socket is behind gets nothing; its queue's messages go to one with room."""
    _, broker, factory = world()
    slow = subscribed(factory, "/queue/jobs", port=1)
    quick = subscribed(factory, "/queue/jobs", port=2)
    publisher = Client(factory, port=3)
    publisher.connect()
    slow.frames(), quick.frames()
    slow.transport.producer.pauseProducing()
    publish(publisher, 10, "/queue/jobs")
    assert bodies(quick) == list(range(10))
    quick.transport.producer.pauseProducing()
    publish(publisher, 5, "/queue/jobs", start=10)
    assert len(broker.engine.queues["/queue/jobs"].pending) == 5
    assert slow.transport.value() == b""
    slow.transport.producer.resumeProducing()
    assert bodies(slow) == list(range(10, 15))


def test_drop_oldest_keeps_the_newest_and_counts_the_rest() -> None:
    """Under drop-oldest a full buffer loses its oldest messages, counted; the newest arrive."""
    _, broker, slow, quick, publisher = slow_and_quick("drop-oldest")
    publish(publisher, 100)
    assert bodies(quick) == list(range(100))
    slow.transport.producer.resumeProducing()
    kept = bodies(slow)
    assert kept == list(range(100 - len(kept), 100)) and 0 < len(kept) < 100
    assert broker.counters.dropped == 100 - len(kept)
    assert not slow.closed


def test_disconnect_closes_the_slow_consumer_with_an_error_naming_the_limit() -> None:
    """Under disconnect a full buffer ends the client with ERROR "slow consumer"; others go on."""
    clock, broker, slow, quick, publisher = slow_and_quick("disconnect")
    publish(publisher, 100)
    clock.advance(0)
    error = slow.error()
    assert error.get("message") == "slow consumer"
    assert b"(slow-consumer-buffer)" in error.body
    assert bodies(quick) == list(range(100))
    assert broker.counters.slow_disconnects == 1
    assert broker.counters.dropped == 100
    publish(publisher, 1, start=100)
    assert bodies(quick) == [100]
    assert clock.getDelayedCalls() == []


def test_block_pauses_the_publisher_until_the_subscriber_catches_up() -> None:
    """Under block nothing is dropped: the publisher is not read until the slow client caught up."""
    _, broker, factory = world("block")
    slow = subscribed(factory, port=1)
    publisher = Client(factory, port=2)
    publisher.connect()
    bystander = Client(factory, port=3)
    bystander.connect()
    slow.frames()
    slow.transport.producer.pauseProducing()
    publish(publisher, 20)
    assert publisher.transport.producerState == "paused"
    bystander.send("SEND", ("destination", "/topic/elsewhere"))
    assert bystander.transport.producerState == "producing"
    slow.transport.producer.resumeProducing()
    assert bodies(slow) == list(range(20))
    assert publisher.transport.producerState == "producing"
    assert broker.counters.dropped == 0


def test_client_that_does_not_read_its_receipts_is_not_read_from() -> None:
    """Frames that cannot be dropped fill the buffer too: then the client is not read from."""
    _, _, factory = world(buffer=200)
    client = Client(factory)
    client.connect()
    client.transport.producer.pauseProducing()
    for number in range(20):
        client.send("SEND", ("destination", "/queue/q"), ("receipt", str(number)))
    assert client.transport.producerState == "paused"
    client.transport.producer.resumeProducing()
    assert [frame.get("receipt-id") for frame in client.frames()] == [str(n) for n in range(20)]
    assert client.transport.producerState == "producing"


def test_error_to_a_slow_client_follows_what_waited() -> None:
    """An ERROR to a client that is behind follows what waited for it, then it is closed."""
    _, _, factory = world(buffer=1 << 20)
    client = subscribed(factory)
    client.frames()
    client.transport.producer.pauseProducing()
    client.send("SEND", ("destination", "/topic/a"), body=b"000001")
    client.send("NOPE")
    frames = client.frames()
    assert [frame.command for frame in frames] == ["MESSAGE", "ERROR"]
    assert client.closed


# -- memory --------------------------------------------------------------------------


def test_memory_over_the_high_mark_pauses_publishers_not_subscribers() -> None:
    """Over the high mark publishers are not read from; under the low mark they all resume."""
    clock, broker, factory = world(limits=Limits(memory_high=100, memory_low=50))
    used = [10]
    broker.memory_gauge = lambda: used[0]
    broker.startService()
    subscriber = subscribed(factory, port=1)
    publisher = Client(factory, port=2)
    publisher.connect()
    publish(publisher, 1)
    assert publisher.transport.producerState == "producing"
    used[0] = 200
    clock.advance(1)
    publish(publisher, 1, start=1)
    subscriber.send("SUBSCRIBE", ("id", "1"), ("destination", "/topic/b"), ("receipt", "r"))
    assert publisher.transport.producerState == "paused"
    assert subscriber.transport.producerState == "producing"
    assert bodies(subscriber) == [0, 1]
    used[0] = 70
    clock.advance(1)
    assert publisher.transport.producerState == "paused"
    used[0] = 40
    clock.advance(1)
    assert publisher.transport.producerState == "producing"
    broker.stopService()


@pytest.mark.parametrize("policy", ["drop-oldest", "disconnect", "block"])
def test_websocket_clients_get_the_same_back_pressure(policy: str) -> None:
    """A WebSocket subscriber that falls behind is handled as on TCP: messages wait, then follow."""
    clock = Clock()
    broker = Broker(clock, limits=NO_WATERMARK)
    config = SessionConfig(
        heartbeat=(0, 0), slow_consumer_policy=policy, slow_consumer_buffer=1 << 20, write_grace=0
    )
    factory = ws.make_factory(clock, broker, config)
    subscriber = ws.Client(factory)
    subscriber.connect()
    subscriber.send(b"SUBSCRIBE\nid:0\ndestination:/topic/a\n\n\x00")
    assert subscriber.transport.producer == WriteProducer(
        subscriber.protocol.session.pause_writing, subscriber.protocol.session.resume_writing
    )
    subscriber.transport.producer.pauseProducing()
    broker.publish("/topic/a", "one")
    broker.publish("/topic/a", "two")
    assert subscriber.received() == []
    subscriber.transport.producer.resumeProducing()
    assert [frame.body for frame in subscriber.stomp(subscriber.received())] == [b"one", b"two"]


def test_websocket_behind_the_web_site_takes_over_back_pressure() -> None:
    """Through twisted.web's upgrade the session is admitted and becomes the producer."""
    clock = Clock()
    broker = Broker(clock, limits=NO_WATERMARK)
    site = WebSite(web_root(broker, clock, SessionConfig(heartbeat=(0, 0))), reactor=clock)
    channel = site.buildProtocol(IPv4Address("TCP", "127.0.0.1", 40000))
    transport = StringTransport(peerAddress=IPv4Address("TCP", "127.0.0.1", 40000))
    transport.protocol = channel  # as a TCP transport has it, for Autobahn's takeover
    channel.makeConnection(transport)
    assert transport.producer is not None  # twisted.web's HTTPChannel
    channel.dataReceived(ws.handshake_request())
    protocol = transport.protocol
    assert isinstance(protocol, StompWebSocketProtocol)
    assert protocol.session in broker.connections
    assert transport.producer == WriteProducer(
        protocol.session.pause_writing, protocol.session.resume_writing
    )
    assert ws.split_response(transport.value())[0] == 101
