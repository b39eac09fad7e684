"""
Worker queues, acknowledgements, redelivery, dead letters, transactions, expiry,
durable subscriptions and temporary queues on the real broker
(``twistd -n stompbroker``), driven by ``stomp.py`` clients and raw sockets.

One broker serves the module, with ``--max-redeliveries 2`` and ``--expired
dead-letter`` so that poison and expired messages can be watched arriving in
their dead-letter queues.  Every test uses destinations of its own.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import Any

import pytest
import stomp

from tests.support.clients import (
    Collector,
    connect,
    flush_deliveries,
    is_marker,
    publish,
    raw_connect,
)
from tests.support.process import BrokerProcess, module_broker

MAX_REDELIVERIES = 2


#: A broker that dead-letters after two redeliveries and dead-letters expired messages.
broker = module_broker(
    "broker", "--max-redeliveries", str(MAX_REDELIVERIES), "--expired", "dead-letter", http=None
)


def unique(kind: str = "queue") -> str:
    return f"/{kind}/{kind[0]}{uuid.uuid4().hex[:10]}"


def settle(connection: Any, version: str, frame: Any, nack: bool = False, **headers: str) -> None:
    """ACK or NACK a MESSAGE the way a client of ``version`` does (STOMP 1.2, 1.1, 1.0 "ACK")."""
    if version == "1.2":
        if nack:
            connection.nack(frame.headers["ack"], **headers)
        else:
            connection.ack(frame.headers["ack"], **headers)
    elif version == "1.1":
        method = connection.nack if nack else connection.ack
        method(frame.headers["message-id"], frame.headers["subscription"], **headers)
    else:
        connection.ack(frame.headers["message-id"], **headers)


class Worker(Collector):
    """
    A consumer that settles each message (markers aside) as it arrives: ``decide(frame)`` says
    ACK or NACK.

    :ivar connection: its connection, set once connected.
    """

    def __init__(self, version: str, decide: Callable[[Any], bool] | None = None) -> None:
        super().__init__()
        self.connection: Any = None
        self.version = version
        self.decide = decide or (lambda frame: True)

    def on_message(self, frame: Any) -> None:
        super().on_message(frame)
        if not is_marker(frame):
            settle(self.connection, self.version, frame, nack=not self.decide(frame))


def worker(
    broker: BrokerProcess,
    destination: str,
    version: str = "1.2",
    decide: Callable[[Any], bool] | None = None,
    **subscribe_headers: str,
) -> tuple[Any, Worker]:
    """Connect, subscribe with client-individual acks, and settle every message as it comes."""
    connection, inbox = connect(broker.address, version, collector=Worker(version, decide))
    inbox.connection = connection
    connection.subscribe(
        destination,
        id=f"w-{uuid.uuid4().hex[:6]}",
        ack="client-individual",
        headers=dict(subscribe_headers, receipt="subscribed"),
    )
    assert inbox.wait_for(lambda: "subscribed" in inbox.receipts)
    return connection, inbox


def eventually(condition: Callable[[], bool], timeout: float = 10.0) -> bool:
    """
    Poll until ``condition()`` holds or ``timeout`` passes, for conditions that span
    several collectors (each collector's own ``wait_for`` wakes only for its frames).
    """
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.01)
    return True


def test_competing_consumers_share_a_queue_without_loss_or_duplicates(
    broker: BrokerProcess,
) -> None:
    """
    Four consumers (STOMP 1.0, 1.1, 1.2, 1.2) on one queue get every message exactly once between
    them.
    """
    destination = unique()
    workers = [
        worker(broker, destination, version, prefetch_count="10")
        for version in ("1.0", "1.1", "1.2", "1.2")
    ]
    bodies = [f"job {n}".encode() for n in range(400)]
    publish(broker.address, destination, bodies)
    inboxes = [inbox for _, inbox in workers]

    def total() -> int:
        return sum(len(inbox.messages) for inbox in inboxes)

    assert eventually(lambda: total() >= len(bodies))
    for connection, inbox in workers:
        flush_deliveries(connection, inbox)
    received = [body for inbox in inboxes for body in inbox.bodies()]
    assert sorted(received) == sorted(bodies)
    assert all(inbox.messages for inbox in inboxes), [len(inbox.messages) for inbox in inboxes]
    for inbox in inboxes:
        numbers = [int(body.split()[1]) for body in inbox.bodies()]
        assert numbers == sorted(numbers), "each consumer sees its messages in queue order"
    for connection, _ in workers:
        connection.disconnect()


def test_dead_consumers_messages_are_redelivered_to_the_others(broker: BrokerProcess) -> None:
    """
    A consumer that dies holding unacknowledged messages has them redelivered, marked, to the
    others.
    """
    destination = unique()
    dying = raw_connect(broker.address)
    assert dying.subscribe(destination, "ack:client", "prefetch-count:5").command == "RECEIPT"
    publish(broker.address, destination, [f"job {n}".encode() for n in range(5)])
    held = dying.read_frames(5)
    assert [frame.body for frame in held] == [f"job {n}".encode() for n in range(5)]
    survivors = [worker(broker, destination) for _ in range(2)]
    publish(broker.address, destination, [b"job 5"])
    dying.socket.close()
    inboxes = [inbox for _, inbox in survivors]
    assert eventually(lambda: sum(len(i.messages) for i in inboxes) >= 6)
    for connection, inbox in survivors:
        flush_deliveries(connection, inbox)
    frames = [frame for inbox in inboxes for frame in inbox.messages]
    assert sorted(frame.body for frame in frames) == [f"job {n}".encode() for n in range(6)]
    redelivered = {frame.body for frame in frames if frame.headers.get("redelivered") == "true"}
    assert redelivered == {f"job {n}".encode() for n in range(5)}
    assert all(
        frame.headers["redelivery-count"] == "1"
        for frame in frames
        if frame.headers.get("redelivered") == "true"
    )
    for connection, _ in survivors:
        connection.disconnect()


def test_poison_message_reaches_the_dead_letter_queue(broker: BrokerProcess) -> None:
    """A message NACKed on every delivery goes, after the redelivery limit, to /queue/DLQ.NAME."""
    destination = unique()
    name = destination.split("/")[-1]
    watcher, dead = connect(broker.address)
    watcher.subscribe(f"/queue/DLQ.{name}", id="dlq", receipt="watching")
    assert dead.wait_for(lambda: "watching" in dead.receipts)
    consumer, inbox = worker(broker, destination, decide=lambda frame: frame.body != b"poison")
    publish(broker.address, destination, [b"ok 1", b"poison", b"ok 2"])
    assert dead.wait_for(lambda: len(dead.messages) == 1, timeout=10)
    [letter] = dead.messages
    assert letter.body == b"poison"
    assert letter.headers["original-destination"] == destination
    assert letter.headers["dead-letter-reason"] == "delivery-limit"
    assert letter.headers["destination"] == f"/queue/DLQ.{name}"
    poison = [frame for frame in inbox.messages if frame.body == b"poison"]
    assert len(poison) == 1 + MAX_REDELIVERIES
    assert [frame.headers.get("redelivery-count") for frame in poison] == [None, "1", "2"]
    assert sorted(inbox.bodies()).count(b"ok 1") == 1
    consumer.disconnect()
    watcher.disconnect()


def test_nack_without_requeue_dead_letters_at_once(broker: BrokerProcess) -> None:
    """NACK with requeue:false moves the message to the dead-letter queue on its first delivery."""
    destination = unique()
    name = destination.split("/")[-1]
    consumer, inbox = connect(broker.address)
    consumer.subscribe(destination, id="s", ack="client-individual")
    publish(broker.address, destination, [b"reject me"])
    assert inbox.wait_for(lambda: len(inbox.messages) == 1)
    consumer.nack(inbox.messages[0].headers["ack"], requeue="false")
    watcher, dead = connect(broker.address)
    watcher.subscribe(f"/queue/DLQ.{name}", id="dlq")
    assert dead.wait_for(lambda: len(dead.messages) == 1)
    assert dead.messages[0].headers["dead-letter-reason"] == "rejected"
    flush_deliveries(consumer, inbox)
    assert len(inbox.messages) == 1
    consumer.disconnect()
    watcher.disconnect()


def test_transactions_commit_and_abort(broker: BrokerProcess) -> None:
    """
    SENDs in a transaction arrive only at COMMIT, all together and in order; ABORTed ones never.
    """
    destination = unique()
    consumer, inbox = connect(broker.address)
    consumer.subscribe(destination, id="s", receipt="ready")
    assert inbox.wait_for(lambda: "ready" in inbox.receipts)
    producer, events = connect(broker.address)
    committed = producer.begin()
    for n in range(3):
        producer.send(destination, f"kept {n}".encode(), transaction=committed)
    aborted = producer.begin()
    producer.send(destination, b"dropped", transaction=aborted)
    producer.send(destination, b"outside", receipt="outside")
    assert events.wait_for(lambda: "outside" in events.receipts)
    assert inbox.wait_for(lambda: len(inbox.messages) == 1)
    flush_deliveries(consumer, inbox, sender=producer)
    assert inbox.bodies() == [b"outside"], "nothing of an open transaction is delivered"
    producer.abort(aborted)
    producer.commit(committed)
    producer.send(destination, b"after", receipt="after")
    assert inbox.wait_for(lambda: len(inbox.messages) == 5)
    assert inbox.bodies() == [b"outside", b"kept 0", b"kept 1", b"kept 2", b"after"]
    producer.disconnect()
    consumer.disconnect()


def test_acks_in_an_aborted_transaction_are_undone(broker: BrokerProcess) -> None:
    """
    An ACK in an aborted transaction leaves the message unacknowledged; a committed one settles it.
    """
    destination = unique()
    consumer, inbox = connect(broker.address)
    consumer.subscribe(
        destination, id="s", ack="client-individual", headers={"prefetch-count": "1"}
    )
    publish(broker.address, destination, [b"first", b"second"])
    assert inbox.wait_for(lambda: len(inbox.messages) == 1)
    ack = inbox.messages[0].headers["ack"]
    aborted = consumer.begin()
    consumer.ack(ack, transaction=aborted)
    consumer.abort(aborted)
    flush_deliveries(consumer, inbox)
    assert inbox.bodies() == [b"first"], "the window is still full"
    committed = consumer.begin()
    consumer.ack(ack, transaction=committed)
    consumer.commit(committed)
    assert inbox.wait_for(lambda: len(inbox.messages) == 2)
    assert inbox.bodies() == [b"first", b"second"]
    consumer.disconnect()


def test_expired_messages_never_arrive(broker: BrokerProcess) -> None:
    """
    Messages past their expiration or expires time are not delivered; with --expired dead-letter
    they are moved.
    """
    destination = unique()
    name = destination.split("/")[-1]
    past = str(int(time.time() * 1000) - 1000)
    publish(broker.address, destination, [b"short-lived"], expiration="100")
    publish(broker.address, destination, [b"already expired"], expires=past)
    publish(broker.address, destination, [b"long-lived"], expiration="60000")
    time.sleep(0.3)
    consumer, inbox = connect(broker.address)
    consumer.subscribe(destination, id="s")
    assert inbox.wait_for(lambda: len(inbox.messages) == 1)
    flush_deliveries(consumer, inbox)
    assert inbox.bodies() == [b"long-lived"]
    watcher, dead = connect(broker.address)
    watcher.subscribe(f"/queue/DLQ.{name}", id="dlq")
    assert dead.wait_for(lambda: len(dead.messages) == 2)
    assert sorted(dead.bodies()) == [b"already expired", b"short-lived"]
    assert {frame.headers["dead-letter-reason"] for frame in dead.messages} == {"expired"}
    topic_subscriber, topic_inbox = connect(broker.address)
    topic = unique("topic")
    topic_subscriber.subscribe(topic, id="t", receipt="ready")
    assert topic_inbox.wait_for(lambda: "ready" in topic_inbox.receipts)
    publish(broker.address, topic, [b"stale news"], expires=past)
    publish(broker.address, topic, [b"news"])
    assert topic_inbox.wait_for(lambda: len(topic_inbox.messages) == 1)
    flush_deliveries(topic_subscriber, topic_inbox)
    assert topic_inbox.bodies() == [b"news"]
    for connection in (consumer, watcher, topic_subscriber):
        connection.disconnect()


def durable_client(broker: BrokerProcess, client_id: str | None) -> tuple[Any, Collector]:
    return connect(broker.address, headers={"client-id": client_id} if client_id else {})


@pytest.mark.parametrize(
    "client_id, headers",
    [
        (None, {"durable": "true", "auto-delete": "false"}),
        ("app-{token}", {"activemq.subscriptionName": "prices"}),
        ("app-{token}", {"durable-subscription-name": "prices"}),
    ],
    ids=["rabbitmq", "activemq", "artemis"],
)
def test_durable_subscriber_gets_what_it_missed(
    broker: BrokerProcess, client_id: str | None, headers: dict[str, str]
) -> None:
    """
    A durable topic subscriber that disconnects and reconnects gets the messages published
    meanwhile.
    """
    token = uuid.uuid4().hex[:8]
    client_id = client_id.format(token=token) if client_id else None
    topic = unique("topic")
    subscription_id = f"sub-{token}"

    def subscribe(connection: Any, inbox: Collector, receipt: str) -> None:
        connection.subscribe(
            topic, id=subscription_id, ack="client", headers=dict(headers, receipt=receipt)
        )
        assert inbox.wait_for(lambda: receipt in inbox.receipts)

    first, inbox = durable_client(broker, client_id)
    subscribe(first, inbox, "s1")
    publish(broker.address, topic, [b"seen"])
    assert inbox.wait_for(lambda: len(inbox.messages) == 1)
    first.ack(inbox.messages[0].headers["ack"])
    first.disconnect()
    publish(broker.address, topic, [b"missed 1", b"missed 2"])
    second, again = durable_client(broker, client_id)
    subscribe(second, again, "s2")
    assert again.wait_for(lambda: len(again.messages) == 2)
    assert again.bodies() == [b"missed 1", b"missed 2"]
    second.ack(again.messages[-1].headers["ack"])
    second.unsubscribe(subscription_id, headers=dict(headers, receipt="removed"))
    assert again.wait_for(lambda: "removed" in again.receipts)
    second.disconnect()
    publish(broker.address, topic, [b"nobody keeps this"])
    third, last = durable_client(broker, client_id)
    subscribe(third, last, "s3")
    flush_deliveries(third, last)
    assert last.messages == []
    third.disconnect()


def test_request_reply_through_a_temporary_queue(broker: BrokerProcess) -> None:
    """
    reply-to:/temp-queue/NAME is rewritten to a name a responder can SEND to; the reply reaches the
    requester.
    """
    service = unique()
    responder, requests = connect(broker.address, "1.1")

    class Responder(stomp.ConnectionListener):
        def on_message(self, frame: Any) -> None:
            responder.send(frame.headers["reply-to"], b"answer to " + frame.body)

    responder.set_listener("responder", Responder())
    responder.subscribe(service, id="rpc", receipt="serving")
    assert requests.wait_for(lambda: "serving" in requests.receipts)
    requester, replies = connect(broker.address)
    requester.send(service, b"question", headers={"reply-to": "/temp-queue/answers"})
    assert replies.wait_for(lambda: len(replies.messages) == 1)
    [reply] = replies.messages
    assert reply.body == b"answer to question"
    assert reply.headers["subscription"] == "/temp-queue/answers"
    assert reply.headers["destination"].startswith("/reply-queue/")
    assert requests.messages[0].headers["reply-to"] == reply.headers["destination"]
    requester.disconnect()
    responder.disconnect()
