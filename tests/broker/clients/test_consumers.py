"""
Tests of :class:`Consumers` on a local engine: where each kind of subscription takes
its messages from, what UNSUBSCRIBE leaves behind, and the settling of ACKs and NACKs.
"""

from __future__ import annotations

import pytest

from stompbroker.broker.queueing.queues import WorkerQueue
from stompbroker.protocol.errors import InvalidDestination, MalformedFrame, UnknownAck
from tests.support.broker import FakeConnection, Inbox
from tests.support.consumers import World


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
    world.clock.advance(1)
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
    world.clock.advance(1)
    assert not consumer.holds("1") and inbox.received[-1].redeliveries == 1


def test_a_nacked_message_waits_longer_each_time_and_blocks_nothing() -> None:
    """
    A NACKed message comes back after the broker's back-off (1 s, then 2 s, ...),
    while the messages behind it are delivered at once.
    """
    world = World()
    inbox = world.subscribe("/queue/q", prefetch=5)
    world.send("/queue/q", b"1")
    world.consumers.nack(world.connection, "1", subscriber=inbox)
    world.send("/queue/q", b"2")
    assert [m.body for m in inbox.received] == [b"1", b"2"]
    world.clock.advance(0.999)
    assert len(inbox.received) == 2
    world.clock.advance(0.001)
    assert (inbox.received[-1].body, inbox.received[-1].redeliveries) == (b"1", 1)
    world.consumers.nack(world.connection, "1", subscriber=inbox)
    world.clock.advance(1.999)
    assert len(inbox.received) == 3
    world.clock.advance(0.001)
    assert inbox.received[-1].redeliveries == 2


def test_a_subscription_sets_its_own_back_off_by_header() -> None:
    """SUBSCRIBE's redelivery-delay, -multiplier and -max-delay override the broker's."""
    world = World()
    inbox = world.subscribe(
        "/queue/q",
        headers={
            "redelivery-delay": "100",
            "redelivery-multiplier": "10",
            "redelivery-max-delay": "500",
        },
    )
    world.send("/queue/q", b"1")
    queue = world.engine.queue("/queue/q")
    waits = []
    for _ in range(3):
        world.consumers.nack(world.connection, inbox.received[-1].message_id, subscriber=inbox)
        assert queue.delayed is not None
        ((due, _message),) = queue.delayed.due_times()
        waits.append(due - world.clock.seconds())
        world.clock.advance(waits[-1])
    assert waits == pytest.approx([0.1, 0.5, 0.5])
    assert inbox.received[-1].redeliveries == 3


def test_a_zero_redelivery_delay_redelivers_at_once() -> None:
    """redelivery-delay:0 on the SUBSCRIBE (or --redelivery-delay 0) redelivers as before."""
    world = World()
    inbox = world.subscribe("/queue/q", headers={"redelivery-delay": "0"})
    world.send("/queue/q", b"1")
    world.consumers.nack(world.connection, "1", subscriber=inbox)
    assert inbox.received[-1].redeliveries == 1


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("redelivery-delay", "-1"),
        ("redelivery-delay", "soon"),
        ("redelivery-multiplier", "0.5"),
        ("redelivery-max-delay", "86400001"),
    ],
)
def test_a_bad_back_off_header_is_refused(name: str, value: str) -> None:
    """A back-off header that is not a number in range is an ERROR naming the header."""
    world = World()
    with pytest.raises(MalformedFrame, match=name):
        world.subscribe("/queue/q", headers={name: value})
    assert not world.engine.queue("/queue/q").consumers


def test_what_a_leaving_consumer_held_comes_back_at_once() -> None:
    """UNSUBSCRIBE returns the messages it held for redelivery without the NACK back-off."""
    world = World()
    first = world.subscribe("/queue/q")
    world.send("/queue/q", b"1")
    other = FakeConnection("c2")
    world.registry.open(other)
    second = Inbox("/queue/q", "client-individual", connection=other)
    world.consumers.subscribe(second)
    world.consumers.unsubscribe(first)
    assert [(m.body, m.redeliveries) for m in second.received] == [(b"1", 1)]


def test_a_queue_with_a_waiting_redelivery_is_not_released() -> None:
    """A queue whose only message waits for its redelivery is kept when its consumer leaves."""
    world = World()
    inbox = world.subscribe("/queue/q")
    world.send("/queue/q", b"1")
    world.consumers.nack(world.connection, "1", subscriber=inbox)
    world.consumers.unsubscribe(inbox)
    assert "/queue/q" in world.engine.queues
    world.clock.advance(1)
    assert [m.body for m in world.engine.queues["/queue/q"].pending] == [b"1"]
