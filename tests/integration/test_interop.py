"""
Issue 14: what real clients (stomp.py, stompjs, 1.0 clients) expect of the
broker at its default settings, against one real ``twistd -n stompbroker``
started with no option that the issue's defaults concern.
"""

from __future__ import annotations

import os
import random
import time
import uuid

from tests.support.clients import RawClient, connect, flush_deliveries, publish
from tests.support.process import BrokerProcess, module_broker

defaults = module_broker("defaults")
MiB = 1024 * 1024


def test_heartbeats_at_the_clients_one_second_pace(defaults: BrokerProcess) -> None:
    """A stomp.py client asking for 1000,1000 gets a beat about every second, not every ten."""
    connection, events = connect(defaults.address, "1.2", heartbeats=(1000, 1000))
    started = time.monotonic()
    assert events.wait_for(lambda: events.heartbeats >= 2, timeout=4)
    assert time.monotonic() - started < 3.5
    assert connection.is_connected()
    assert not events.errors
    connection.disconnect()


def test_silent_client_is_dropped_after_two_of_its_intervals(defaults: BrokerProcess) -> None:
    """
    A client that promised a beat every second and sends none is dropped after about two
    seconds, and CONNECTED told it the intervals applied.
    """
    client = RawClient(defaults.address)
    connected = client.connect("1.2", "1000,0")
    assert connected.get("heart-beat") == "0,1000"
    started = time.monotonic()
    frames = client.read_frames(count=10, timeout=6)
    elapsed = time.monotonic() - started
    assert frames and frames[-1].get("message") == "heart-beat timeout"
    assert 1.5 <= elapsed < 3.5
    assert client.closed_by_peer()


def test_a_4_mib_message_to_a_queue_passes_at_the_defaults(defaults: BrokerProcess) -> None:
    """Issue 14: a 4 MiB body (a full 4 MiB frame was over the old limit) reaches a consumer."""
    destination = f"/queue/large.{uuid.uuid4().hex[:8]}"
    consumer, inbox = connect(defaults.address)
    consumer.subscribe(destination, id="1", receipt="s")
    assert inbox.wait_for(lambda: "s" in inbox.receipts)
    body = os.urandom(4 * MiB)
    publisher, events = connect(defaults.address)
    publisher.send(destination, body, receipt="sent")
    assert events.wait_for(lambda: "sent" in events.receipts, timeout=20)
    assert inbox.wait_for(lambda: inbox.messages, timeout=20)
    assert inbox.bodies() == [body]
    assert not events.errors and not inbox.errors
    publisher.disconnect()
    consumer.disconnect()


def test_a_16_mib_message_reaches_two_topic_subscribers(defaults: BrokerProcess) -> None:
    """
    Issue 14: a 16 MiB body, twice --slow-consumer-buffer, reaches both subscribers of a topic
    at the defaults, neither of which is dropped as a slow consumer.
    """
    destination = f"/topic/large.{uuid.uuid4().hex[:8]}"
    subscribers = [connect(defaults.address) for _ in range(2)]
    for connection, inbox in subscribers:
        connection.subscribe(destination, id="1", receipt="s")
        assert inbox.wait_for(lambda inbox=inbox: "s" in inbox.receipts)
    body = os.urandom(16 * MiB)
    publisher, events = connect(defaults.address)
    publisher.send(destination, body, receipt="sent")
    assert events.wait_for(lambda: "sent" in events.receipts, timeout=30)
    for connection, inbox in subscribers:
        assert inbox.wait_for(lambda inbox=inbox: inbox.messages, timeout=30)
        assert inbox.bodies() == [body]
        assert not inbox.errors
        assert connection.is_connected()
        connection.disconnect()
    publisher.disconnect()


def test_small_messages_pass_while_a_large_frame_is_half_sent(defaults: BrokerProcess) -> None:
    """A 16 MiB frame arriving slowly holds up no other client's small messages meanwhile."""
    destination = f"/topic/small.{uuid.uuid4().hex[:8]}"
    subscriber, inbox = connect(defaults.address)
    subscriber.subscribe(destination, id="1", receipt="s")
    assert inbox.wait_for(lambda: "s" in inbox.receipts)
    large = RawClient(defaults.address)
    large.connect()
    size = 16 * MiB
    large.send(b"SEND\ndestination:/topic/nobody\ncontent-length:%d\n\n" % size)
    large.send(b"x" * (size // 2))
    publisher, events = connect(defaults.address)
    started = time.monotonic()
    publisher.send(destination, b"small")
    assert inbox.wait_for(lambda: inbox.bodies() == [b"small"], timeout=5)
    assert time.monotonic() - started < 1.0
    large.send(b"x" * (size - size // 2) + b"\0DISCONNECT\nreceipt:bye\n\n\0")
    [receipt] = large.read_frames(count=1, timeout=20)
    assert receipt.get("receipt-id") == "bye"
    publisher.disconnect()
    subscriber.disconnect()


def test_1_1_ack_with_a_foreign_subscription_header_settles(defaults: BrokerProcess) -> None:
    """
    Issue 14: a stomp.py 1.1 client that ACKs with a subscription header naming none of its
    subscriptions (the destination) settles the message; no ERROR, and it is not redelivered.
    """
    destination = f"/queue/ack.{uuid.uuid4().hex[:8]}"
    consumer, inbox = connect(defaults.address, "1.1")
    consumer.subscribe(destination, id="s", ack="client", receipt="s")
    assert inbox.wait_for(lambda: "s" in inbox.receipts)
    publish(defaults.address, destination, [b"1", b"2", b"3"])
    assert inbox.wait_for(lambda: len(inbox.messages) == 3)
    second = inbox.messages[1]
    consumer.nack(second.headers["message-id"], destination, receipt="nacked")
    assert inbox.wait_for(lambda: "nacked" in inbox.receipts)
    assert inbox.wait_for(lambda: len(inbox.messages) == 5)
    assert inbox.bodies()[3:] == [b"1", b"2"]
    for message in inbox.messages[2:]:
        consumer.ack(message.headers["message-id"], destination, receipt="acked")
    assert inbox.wait_for(lambda: inbox.receipts.count("acked") == 3)
    consumer.unsubscribe(id="s")
    flush_deliveries(consumer, inbox)
    assert not inbox.errors
    again, events = connect(defaults.address, "1.1")
    again.subscribe(destination, id="t", receipt="t")
    assert events.wait_for(lambda: "t" in events.receipts)
    flush_deliveries(again, events)
    assert events.messages == []
    again.disconnect()
    consumer.disconnect()


def test_subscribe_receipt_arrives_before_waiting_messages(defaults: BrokerProcess) -> None:
    """Issue 14: a SUBSCRIBE's RECEIPT is the first frame, before the messages already queued."""
    destination = f"/queue/waiting.{uuid.uuid4().hex[:8]}"
    publish(defaults.address, destination, [b"1", b"2", b"3"])
    client = RawClient(defaults.address)
    client.connect()
    client.send(f"SUBSCRIBE\nid:0\ndestination:{destination}\nreceipt:live\n\n\0".encode())
    frames = client.read_frames(count=4)
    assert [(f.command, f.get("receipt-id") or f.body) for f in frames] == [
        ("RECEIPT", "live"),
        ("MESSAGE", b"1"),
        ("MESSAGE", b"2"),
        ("MESSAGE", b"3"),
    ]
    client.close()


def test_stomp_1_0_subscription_without_id_gets_no_subscription_header(
    defaults: BrokerProcess,
) -> None:
    """
    Issue 14: a 1.0 client that subscribes without an id gets MESSAGE frames without a
    subscription header, as from ActiveMQ, and unsubscribes by destination.
    """
    destination = f"/queue/old.{uuid.uuid4().hex[:8]}"
    client = RawClient(defaults.address)
    assert client.connect("1.0").get("version") == "1.0"
    client.send(f"SUBSCRIBE\ndestination:{destination}\nreceipt:s\n\n\0".encode())
    assert client.read_frames(count=1)[0].command == "RECEIPT"
    publish(defaults.address, destination, [b"old"])
    [message] = client.read_frames(count=1)
    assert message.command == "MESSAGE"
    assert message.get("subscription") is None
    assert (message.get("destination"), message.body) == (destination, b"old")
    client.send(f"UNSUBSCRIBE\ndestination:{destination}\nreceipt:u\n\n\0".encode())
    assert client.read_frames(count=1)[0].get("receipt-id") == "u"
    publish(defaults.address, destination, [b"later"])
    assert client.read_frames(count=1, timeout=0.5) == []
    client.close()


def test_random_bytes_get_an_error_at_once(defaults: BrokerProcess) -> None:
    """
    Issue 14: 4 KiB of random bytes from a connected client get an ERROR and a close within a
    second, not at the frame timeout (60 s by default), though they hold no empty line.
    """
    garbage = random.Random(14).randbytes(4096)
    assert b"\n\n" not in garbage and b"\n" in garbage
    client = RawClient(defaults.address)
    client.connect()
    started = time.monotonic()
    client.send(garbage)
    frames = client.read_frames(count=1, timeout=1.0)
    assert [frame.command for frame in frames] == ["ERROR"]
    assert frames[0].get("message") in ("unknown command", "header section is not valid UTF-8")
    assert time.monotonic() - started < 1.0
    assert client.closed_by_peer()
