"""
Tests of :class:`Consumers` on a local engine: where each kind of subscription takes
its messages from, what UNSUBSCRIBE leaves behind, and the settling of ACKs and NACKs.
"""

from __future__ import annotations

from typing import Any

import pytest
from twisted.internet.task import Clock

from stompbroker.broker.clients.connections import ConnectionRegistry
from stompbroker.broker.clients.consumers import Consumers
from stompbroker.broker.clients.transactions import Transactions
from stompbroker.broker.engine.local import LocalEngine
from stompbroker.broker.flow.backpressure import BackPressure
from stompbroker.broker.flow.limits import Limits
from stompbroker.broker.queueing.delivery import DeliveryPolicy
from stompbroker.broker.queueing.queues import WorkerQueue
from stompbroker.protocol.errors import InvalidDestination, UnknownAck
from stompbroker.protocol.message import Message
from tests.support.broker import FakeConnection, Inbox


class World:
    """Consumers over a local engine, with one open connection."""

    def __init__(self, policy: DeliveryPolicy | None = None) -> None:
        policy = policy if policy is not None else DeliveryPolicy()
        self.engine = LocalEngine(Clock(), policy=policy)
        limits = Limits(memory_high=0)
        self.registry = ConnectionRegistry(
            limits, self.engine.traffic, self.engine.ids, self.engine
        )
        backpressure = BackPressure(Clock(), limits, self.engine.counters, set())
        self.transactions = Transactions(self.registry, limits, backpressure)
        self.consumers = Consumers(self.engine, self.registry, self.transactions, policy)
        self.connection = FakeConnection()
        self.registry.open(self.connection)

    def subscribe(self, destination: str, ack_mode: str = "client-individual", **kw: Any) -> Inbox:
        inbox = Inbox(destination, ack_mode, connection=self.connection, **kw)
        self.consumers.subscribe(inbox)
        return inbox

    def send(self, destination: str, *bodies: bytes) -> None:
        for body in bodies:
            message = Message(destination, body.decode(), (), body)
            if destination.startswith("/topic/"):
                self.engine.publish_topic(message)
            else:
                self.engine.publish_queue(message)


def test_an_auto_topic_subscription_sits_in_the_tree_itself() -> None:
    """auto ack without a durable name: the subscriber is matched directly, with no consumer."""
    world = World()
    inbox = world.subscribe("/topic/a.*", "auto")
    assert world.engine.topics.match("/topic/a.b") == (inbox,)
    assert world.registry.states[world.connection].consumers == {}


def test_a_client_ack_topic_subscription_gets_a_queue_of_its_own() -> None:
    """client acknowledgement on a topic: a queue in the tree, consumed by the subscriber."""
    world = World()
    inbox = world.subscribe("/topic/a", "client")
    [queue] = world.engine.topics.match("/topic/a")
    assert isinstance(queue, WorkerQueue) and queue.consumers[0].subscriber is inbox
    world.send("/topic/a", b"1")
    assert inbox.bodies() == [b"1"]


def test_a_durable_subscription_outlives_its_unsubscribe() -> None:
    """A durable name's queue stays, collecting, after its subscriber leaves."""
    world = World()
    inbox = world.subscribe("/topic/a", "client", durable=("c", "d"))
    world.consumers.unsubscribe(inbox)
    world.send("/topic/a", b"kept")
    assert [m.body for m in world.engine.durable[("c", "d")].pending] == [b"kept"]


def test_a_reply_queue_cannot_be_subscribed_to() -> None:
    """Replies reach their requester through reply-to, never through SUBSCRIBE."""
    world = World()
    with pytest.raises(InvalidDestination, match="reply queue"):
        world.subscribe("/reply-queue/tmp-x-1")


def test_unsubscribing_the_last_consumer_of_an_empty_queue_deletes_it() -> None:
    """Queues are made on first use, so an idle one goes; one holding messages stays."""
    world = World()
    inbox = world.subscribe("/queue/q")
    world.consumers.unsubscribe(inbox)
    assert "/queue/q" not in world.engine.queues
    world.send("/queue/kept", b"1")
    other = world.subscribe("/queue/kept", prefetch=1)
    world.send("/queue/kept", b"2")
    world.consumers.unsubscribe(other)
    assert [m.body for m in world.engine.queues["/queue/kept"].pending] == [b"1", b"2"]


def test_an_ack_naming_the_subscription_settles_and_makes_room() -> None:
    """STOMP 1.2: ACK with the subscription settles the message and the window takes the next."""
    world = World()
    inbox = world.subscribe("/queue/q", prefetch=1)
    world.send("/queue/q", b"1", b"2")
    assert world.consumers.ack(world.connection, "1", subscriber=inbox) is None
    assert inbox.bodies() == [b"1", b"2"]
    assert world.engine.counters.acknowledged == 1


def test_an_ack_without_a_subscription_searches_the_connection() -> None:
    """STOMP 1.0 names no subscription: the connection's consumers are searched."""
    world = World()
    inbox = world.subscribe("/queue/q")
    world.send("/queue/q", b"1")
    world.consumers.ack(world.connection, "1")
    assert not world.registry.states[world.connection].consumers[inbox].holds("1")


def test_an_ack_of_what_is_not_held_is_unknown() -> None:
    """Acknowledging twice, or an auto subscription's message, is UnknownAck."""
    world = World()
    inbox = world.subscribe("/queue/q")
    world.send("/queue/q", b"1")
    world.consumers.ack(world.connection, "1", subscriber=inbox)
    with pytest.raises(UnknownAck) as twice:
        world.consumers.ack(world.connection, "1", subscriber=inbox)
    assert "subscription 's'" in twice.value.detail
    with pytest.raises(UnknownAck) as unnamed:
        world.consumers.nack(world.connection, "1")
    assert "on this connection" in unnamed.value.detail


def test_nack_requeues_for_redelivery_or_dead_letters_at_once() -> None:
    """NACK returns the message with redelivered:true; requeue:false dead-letters it."""
    world = World()
    inbox = world.subscribe("/queue/q")
    world.send("/queue/q", b"1")
    world.consumers.nack(world.connection, "1", subscriber=inbox)
    assert inbox.received[-1].redeliveries == 1
    world.consumers.nack(world.connection, "1", subscriber=inbox, requeue=False)
    assert [m.body for m in world.engine.queues["/queue/DLQ.q"].pending] == [b"1"]
    assert world.engine.traffic.destinations["/queue/q"].messages_nacked == 2


def test_a_transaction_holds_acks_until_commit_and_drops_them_on_abort() -> None:
    """STOMP 1.2, ACK in a transaction: settled at COMMIT; ABORT leaves the message unacked."""
    world = World()
    inbox = world.subscribe("/queue/q")
    world.send("/queue/q", b"1", b"2")
    consumer = world.registry.states[world.connection].consumers[inbox]
    world.transactions.begin(world.connection, "a")
    world.consumers.ack(world.connection, "1", subscriber=inbox, transaction="a")
    world.transactions.abort(world.connection, "a")
    assert consumer.holds("1")
    world.transactions.begin(world.connection, "b")
    world.consumers.ack(world.connection, "1", subscriber=inbox, transaction="b")
    world.consumers.nack(world.connection, "2", subscriber=inbox, transaction="b")
    assert consumer.holds("1")
    world.transactions.commit(world.connection, "b")
    assert not consumer.holds("1") and inbox.received[-1].redeliveries == 1
