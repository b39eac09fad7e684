"""
Message priority wired into the broker: SEND ``priority`` orders a queue, through
real sessions on an in-process broker, and comes back from the store.
"""

from __future__ import annotations

from collections import deque

from stompbroker.broker.queueing.priorities import PendingMessages
from stompbroker.broker.store.base import RecoveredState, stored_message
from stompbroker.broker.store.recovery import rebuild
from stompbroker.protocol.message import Message
from tests.support.broker import World


def test_higher_priorities_are_delivered_first_fifo_within_one() -> None:
    """Messages waiting in a queue go out highest priority first, in sending order within one."""
    world = World()
    producer = world.client()
    for body, priority in ((b"a", "1"), (b"b", "7"), (b"c", "4"), (b"d", "7"), (b"e", "9")):
        producer.send_frame("SEND", body, destination="/queue/q", priority=priority)
    consumer = world.client()
    consumer.send_frame("SUBSCRIBE", id="s", destination="/queue/q")
    received = consumer.messages()
    assert [frame.body for frame in received] == [b"e", b"b", b"d", b"c", b"a"]
    assert [frame.get("priority") for frame in received] == ["9", "7", "7", "4", "1"]


def test_a_queue_keeps_its_deque_until_another_priority_comes() -> None:
    """Default priorities (absent, or 4) leave the plain deque; the first other one swaps it."""
    world = World()
    producer = world.client()
    producer.send_frame("SEND", b"a", destination="/queue/q")
    producer.send_frame("SEND", b"b", destination="/queue/q", priority="4")
    queue = world.broker.engine.queues["/queue/q"]
    assert type(queue.pending) is deque
    producer.send_frame("SEND", b"c", destination="/queue/q", priority="5")
    assert isinstance(queue.pending, PendingMessages)
    consumer = world.client()
    consumer.send_frame("SUBSCRIBE", id="s", destination="/queue/q")
    assert [frame.body for frame in consumer.messages()] == [b"c", b"a", b"b"]


def test_a_priority_that_is_not_a_number_is_an_error() -> None:
    """priority must be 0 to 9: anything else is an ERROR, as a bad expires is."""
    world = World()
    producer = world.client()
    producer.send_frame("SEND", b"a", destination="/queue/q", priority="high")
    [error] = producer.frames()
    assert error.command == "ERROR"
    assert "priority" in (error.get("message") or "")


def test_a_redelivered_message_goes_back_to_the_head_of_its_priority() -> None:
    """A NACKed message returns before its peers of the same priority, after higher ones."""
    world = World()
    producer, consumer = world.client(), world.client()
    consumer.send_frame(
        "SUBSCRIBE", id="s", destination="/queue/q", ack="client-individual", prefetch_count="1"
    )
    producer.send_frame("SEND", b"first", destination="/queue/q", priority="5")
    producer.send_frame("SEND", b"peer", destination="/queue/q", priority="5")
    producer.send_frame("SEND", b"urgent", destination="/queue/q", priority="8")
    [first] = consumer.messages()
    consumer.ack(first, "NACK")
    world.clock.advance(1)  # the back-off: "urgent" was handed out meanwhile
    bodies = []
    for _ in range(3):
        [frame] = consumer.messages()
        bodies.append(frame.body)
        consumer.ack(frame)
    assert bodies == [b"urgent", b"first", b"peer"]


def test_recovery_derives_the_priority_from_the_stored_headers() -> None:
    """A message rebuilt from the store has the priority its headers say."""
    world = World()
    sent = Message("/queue/q", "m-1", (("priority", "8"),), b"x", persistent=True)
    state = RecoveredState.from_records([stored_message("/queue/q", 1, sent)], [])
    rebuild(world.broker.engine, state)
    [recovered] = world.broker.engine.queues["/queue/q"].pending
    assert recovered.priority == 8
