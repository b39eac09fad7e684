"""
Sessions and the real broker together, frames in and frames out, without sockets:
the acknowledgement, transaction, reply and durable-subscription conversations a
client has, in each protocol version where the version matters.
"""

from __future__ import annotations

import pytest

from stompbroker.broker.queueing.delivery import DeliveryPolicy
from stompbroker.protocol.frames import Frame
from tests.support.broker import World

VERSIONS = ["1.0", "1.1", "1.2"]


@pytest.mark.parametrize("version", VERSIONS)
def test_client_individual_ack_and_nack_in_each_version(version: str) -> None:
    """
    STOMP ACK/NACK by id (1.2), message-id and subscription (1.1) or message-id (1.0) settle the
    right message.
    """
    world = World()
    consumer, producer = world.client(version), world.client()
    consumer.send_frame("SUBSCRIBE", id="s", destination="/queue/q", ack="client-individual")
    for body in (b"1", b"2"):
        producer.send_frame("SEND", body, destination="/queue/q")
    first, second = consumer.messages()
    consumer.ack(second, receipt="acked")
    assert consumer.frames() == [Frame("RECEIPT", (("receipt-id", "acked"),))]
    consumer.ack(first, "NACK")
    world.clock.advance(1)  # the broker's redelivery back-off
    [again] = consumer.messages()
    assert (again.body, again.get("redelivered"), again.get("redelivery-count")) == (
        b"1",
        "true",
        "1",
    )
    assert again.get("message-id") == first.get("message-id")
    consumer.ack(again)
    assert world.broker.counters.acknowledged == 2


def test_client_mode_ack_is_cumulative() -> None:
    """
    STOMP 1.2, "SUBSCRIBE ack Header": an ACK in client mode also acknowledges every earlier
    message.
    """
    world = World()
    consumer = world.client()
    consumer.send_frame(
        "SUBSCRIBE", id="s", destination="/queue/q", ack="client", prefetch_count="3"
    )
    for body in (b"1", b"2", b"3", b"4", b"5"):
        world.broker.publish("/queue/q", body)
    messages = consumer.messages()
    assert [m.body for m in messages] == [b"1", b"2", b"3"]
    consumer.ack(messages[1])
    assert [m.body for m in consumer.messages()] == [b"4", b"5"]
    consumer.ack(messages[0], receipt="r")
    [error] = consumer.frames()
    assert error.get("message") == "unknown message to acknowledge"


def test_client_mode_nack_is_cumulative() -> None:
    """
    Issue 14: in client mode a NACK, as an ACK, settles the named message and every earlier
    unacknowledged one of the subscription: they all come back, redelivered.
    """
    world = World()
    consumer = world.client()
    consumer.send_frame("SUBSCRIBE", id="s", destination="/queue/q", ack="client")
    for body in (b"1", b"2", b"3"):
        world.broker.publish("/queue/q", body)
    messages = consumer.messages()
    consumer.ack(messages[1], "NACK")
    world.clock.advance(1)  # the broker's redelivery back-off
    again = consumer.messages()
    assert [(m.body, m.get("redelivered")) for m in again] == [(b"1", "true"), (b"2", "true")]
    consumer.ack(messages[2], receipt="r")
    assert consumer.frames() == [Frame("RECEIPT", (("receipt-id", "r"),))]


@pytest.mark.parametrize("command", ["ACK", "NACK"])
def test_1_1_ack_or_nack_with_a_foreign_subscription_header_settles(command: str) -> None:
    """
    Issue 14: a 1.1 ACK or NACK whose subscription header names no subscription of the
    connection (a destination, say) still settles the message-id the connection holds.
    """
    world = World()
    consumer = world.client("1.1")
    consumer.send_frame("SUBSCRIBE", id="s", destination="/queue/q", ack="client-individual")
    world.broker.publish("/queue/q", b"1")
    [message] = consumer.messages()
    consumer.send_frame(
        command,
        message_id=message.get("message-id") or "",
        subscription="/queue/q",
        requeue="false",
        receipt="r",
    )
    assert consumer.frames() == [Frame("RECEIPT", (("receipt-id", "r"),))]
    consumer.send_frame("UNSUBSCRIBE", id="s")
    consumer.send_frame("SUBSCRIBE", id="t", destination="/queue/q")
    assert consumer.frames() == []


@pytest.mark.parametrize("ack", ["auto", "client"])
def test_subscribe_receipt_comes_before_the_messages_waiting_in_the_queue(ack: str) -> None:
    """
    Issue 14: the RECEIPT of a SUBSCRIBE goes out before the first MESSAGE of the subscription,
    messages already waiting in its queue included; later ones follow as usual.
    """
    world = World()
    for body in (b"1", b"2"):
        world.broker.publish("/queue/q", body)
    consumer = world.client()
    consumer.send_frame("SUBSCRIBE", id="s", destination="/queue/q", ack=ack, receipt="live")
    frames = consumer.frames()
    assert [(f.command, f.get("receipt-id") or f.body) for f in frames] == [
        ("RECEIPT", "live"),
        ("MESSAGE", b"1"),
        ("MESSAGE", b"2"),
    ]
    world.broker.publish("/queue/q", b"3")
    assert [m.body for m in consumer.messages()] == [b"3"]


def test_lost_connection_returns_messages_to_another_consumer() -> None:
    """
    A consumer that vanishes mid-work has its unacknowledged messages redelivered to the others.
    """
    world = World()
    crashing, steady = world.client(), world.client("1.1")
    crashing.send_frame(
        "SUBSCRIBE", id="c", destination="/queue/work", ack="client", prefetch_count="2"
    )
    for n in range(2):
        world.broker.publish("/queue/work", f"job {n}")
    assert len(crashing.messages()) == 2
    steady.send_frame("SUBSCRIBE", id="s", destination="/queue/work", ack="client-individual")
    crashing.session.connection_lost()
    redelivered = steady.messages()
    assert [(m.body, m.get("redelivered")) for m in redelivered] == [
        (b"job 0", "true"),
        (b"job 1", "true"),
    ]


def test_poison_message_reaches_the_dead_letter_queue() -> None:
    """
    A message NACKed past the redelivery limit lands in /queue/DLQ.NAME with its origin and reason.
    """
    world = World(DeliveryPolicy(max_redeliveries=2))
    consumer, watcher = world.client(), world.client()
    consumer.send_frame("SUBSCRIBE", id="s", destination="/queue/orders", ack="client-individual")
    watcher.send_frame("SUBSCRIBE", id="d", destination="/queue/DLQ.orders")
    world.broker.publish("/queue/orders", b"poison")
    for _ in range(3):
        [message] = consumer.messages()
        consumer.ack(message, "NACK")
        world.clock.advance(2)  # the redelivery back-off: 1 s, then 2 s
    assert consumer.frames() == []
    [letter] = watcher.messages()
    assert letter.body == b"poison"
    assert letter.get("original-destination") == "/queue/orders"
    assert letter.get("dead-letter-reason") == "delivery-limit"


def test_transaction_commit_and_abort_over_frames() -> None:
    """SENDs and ACKs in a transaction happen at COMMIT; ABORT discards SENDs and undoes ACKs."""
    world = World()
    consumer, producer = world.client(), world.client()
    consumer.send_frame(
        "SUBSCRIBE", id="s", destination="/queue/q", ack="client", prefetch_count="1"
    )
    producer.send_frame("BEGIN", transaction="t1")
    producer.send_frame("SEND", b"kept", destination="/queue/q", transaction="t1")
    producer.send_frame("BEGIN", transaction="t2")
    producer.send_frame("SEND", b"dropped", destination="/queue/q", transaction="t2")
    assert consumer.frames() == []
    producer.send_frame("ABORT", transaction="t2")
    producer.send_frame("COMMIT", transaction="t1", receipt="c")
    assert producer.frames() == [Frame("RECEIPT", (("receipt-id", "c"),))]
    [message] = consumer.messages()
    assert message.body == b"kept"
    world.broker.publish("/queue/q", b"next")
    consumer.send_frame("BEGIN", transaction="a")
    consumer.ack(message, transaction="a")
    consumer.send_frame("ABORT", transaction="a")
    assert consumer.frames() == [], "the aborted ACK made no room"
    consumer.send_frame("BEGIN", transaction="b")
    consumer.ack(message, transaction="b")
    assert consumer.frames() == []
    consumer.send_frame("COMMIT", transaction="b")
    assert [m.body for m in consumer.messages()] == [b"next"]


@pytest.mark.parametrize(
    "frames, message",
    [
        ([("COMMIT", {"transaction": "nope"})], "unknown transaction"),
        (
            [("BEGIN", {"transaction": "t"}), ("BEGIN", {"transaction": "t"})],
            "transaction already open",
        ),
        ([("SEND", {"destination": "/queue/q", "transaction": "nope"})], "unknown transaction"),
    ],
    ids=["unknown", "reused-while-open", "send-in-unknown"],
)
def test_transaction_errors_over_frames(frames: list, message: str) -> None:
    """An unknown transaction, or a BEGIN of one already open, gets an ERROR and a close."""
    world = World()
    client = world.client()
    for command, headers in frames:
        client.send_frame(command, **headers)
    error = client.frames()[-1]
    assert (error.command, error.get("message")) == ("ERROR", message)
    assert client.closed


def test_connection_lost_with_open_transaction_publishes_nothing() -> None:
    """A connection that closes with an open transaction aborts it."""
    world = World()
    consumer, producer = world.client(), world.client()
    consumer.send_frame("SUBSCRIBE", id="s", destination="/queue/q")
    producer.send_frame("BEGIN", transaction="t")
    producer.send_frame("SEND", b"x", destination="/queue/q", transaction="t")
    producer.session.connection_lost()
    assert consumer.frames() == []
    assert not world.broker.engine.queues["/queue/q"].pending


def test_request_reply_through_a_temporary_queue() -> None:
    """
    reply-to:/temp-queue/NAME is rewritten; the responder's reply reaches the requester under that
    name.
    """
    world = World()
    requester, responder = world.client(), world.client("1.1")
    responder.send_frame("SUBSCRIBE", id="rpc", destination="/queue/rpc")
    requester.send_frame("SEND", b"2+2", destination="/queue/rpc", reply_to="/temp-queue/answers")
    [request] = responder.messages()
    reply_to = request.get("reply-to") or ""
    assert reply_to.startswith("/reply-queue/")
    responder.send_frame("SEND", b"4", destination=reply_to)
    [reply] = requester.messages()
    assert (reply.body, reply.get("subscription"), reply.get("destination")) == (
        b"4",
        "/temp-queue/answers",
        reply_to,
    )
    requester.send_frame("DISCONNECT")
    assert reply_to not in world.broker.engine.queues


@pytest.mark.parametrize(
    "connect, subscribe, unsubscribe",
    [
        ({}, {"id": "sub-1", "durable": "true"}, {"id": "sub-1", "durable": "true"}),
        (
            {"client_id": "app"},
            {"id": "1", "activemq.subscriptionName": "prices"},
            {"id": "1", "activemq.subscriptionName": "prices"},
        ),
        (
            {"client_id": "app"},
            {"id": "1", "durable-subscription-name": "prices"},
            {"id": "1", "durable-subscription-name": "prices"},
        ),
    ],
    ids=["rabbitmq", "activemq", "artemis"],
)
def test_durable_subscriber_gets_what_it_missed(
    connect: dict, subscribe: dict, unsubscribe: dict
) -> None:
    """A durable topic subscriber that reconnects gets the messages published while it was away."""
    world = World()
    first = world.client(**connect)
    first.send_frame("SUBSCRIBE", destination="/topic/prices", ack="client", **subscribe)
    world.broker.publish("/topic/prices", b"1")
    first.ack(first.messages()[0])
    first.send_frame("DISCONNECT")
    world.broker.publish("/topic/prices", b"2")
    world.broker.publish("/topic/prices", b"3")
    second = world.client(**connect)
    second.send_frame("SUBSCRIBE", destination="/topic/prices", ack="client", **subscribe)
    messages = second.messages()
    assert [m.body for m in messages] == [b"2", b"3"]
    second.ack(messages[-1])
    second.send_frame("UNSUBSCRIBE", **unsubscribe)
    world.broker.publish("/topic/prices", b"4")
    assert world.broker.engine.durable == {}
    third = world.client(**connect)
    third.send_frame("SUBSCRIBE", destination="/topic/prices", ack="client", **subscribe)
    assert third.frames() == []


def test_topic_client_ack_subscription_redelivers_after_nack() -> None:
    """
    Topic subscriptions accept client acks: a NACKed topic message is redelivered to that
    subscription only.
    """
    world = World()
    nacking, other = world.client(), world.client()
    nacking.send_frame("SUBSCRIBE", id="a", destination="/topic/news.*", ack="client-individual")
    other.send_frame("SUBSCRIBE", id="b", destination="/topic/news.*")
    world.broker.publish("/topic/news.today", b"headline")
    [message] = nacking.messages()
    nacking.ack(message, "NACK")
    world.clock.advance(1)  # the broker's redelivery back-off
    [again] = nacking.messages()
    assert (again.body, again.get("redelivered")) == (b"headline", "true")
    assert [m.body for m in other.messages()] == [b"headline"]


def test_expired_message_never_arrives() -> None:
    """A queued message whose expiration passes before anyone subscribes is never delivered."""
    world = World()
    producer = world.client()
    producer.send_frame("SEND", b"stale", destination="/queue/q", expiration="1000")
    producer.send_frame("SEND", b"fresh", destination="/queue/q", expiration="60000")
    world.clock.advance(2)
    consumer = world.client()
    consumer.send_frame("SUBSCRIBE", id="s", destination="/queue/q")
    assert [m.body for m in consumer.messages()] == [b"fresh"]
    assert world.broker.counters.expired == 1


def test_two_client_ack_subscriptions_on_one_connection_ack_separately() -> None:
    """
    The same topic message held by two subscriptions of one connection is acknowledged in each by
    its ack id.
    """
    world = World()
    client = world.client()
    client.send_frame("SUBSCRIBE", id="a", destination="/topic/t", ack="client-individual")
    client.send_frame("SUBSCRIBE", id="b", destination="/topic/t", ack="client-individual")
    world.broker.publish("/topic/t", b"x")
    first, second = client.messages()
    assert first.get("message-id") == second.get("message-id")
    assert first.get("ack") != second.get("ack")
    client.ack(second)
    client.ack(first, receipt="both")
    assert client.frames() == [Frame("RECEIPT", (("receipt-id", "both"),))]
    assert world.broker.counters.acknowledged == 2


def test_wildcard_queue_subscription_takes_from_every_matching_queue() -> None:
    """SUBSCRIBE to a queue pattern: MESSAGEs from each matching queue, each naming its queue."""
    world = World()
    client = world.client()
    client.send_frame("SUBSCRIBE", id="s", destination="/queue/jobs.*")
    world.broker.publish("/queue/jobs.a", b"1")
    world.broker.publish("/queue/jobs.b", b"2")
    world.broker.publish("/queue/other", b"3")
    messages = client.messages()
    assert [(m.get("destination"), m.body) for m in messages] == [
        ("/queue/jobs.a", b"1"),
        ("/queue/jobs.b", b"2"),
    ]
    assert {m.get("subscription") for m in messages} == {"s"}


def test_send_to_a_queue_pattern_stays_an_error() -> None:
    """A SEND names one queue: a wildcard in it is an ERROR."""
    world = World()
    client = world.client()
    client.send_frame("SEND", destination="/queue/jobs.*")
    [error] = client.frames()
    assert error.get("message") == "wildcard in queue destination"
