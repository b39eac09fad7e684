"""
Tests of :class:`DeadLetters` on its own: the copy a dead-letter queue gets, the discard
of what fails there, the store's move, and expiry at routing.
"""

from __future__ import annotations

from typing import Any

from stompbroker.broker.flow.traffic import Traffic
from stompbroker.broker.queueing.dead_letters import EXPIRED, REJECTED, DeadLetters
from stompbroker.broker.queueing.delivery import DeliveryCounters, DeliveryPolicy
from stompbroker.broker.routing.ids import Ids
from stompbroker.protocol.message import Message


class Queue:
    """A dead-letter queue that keeps what it is given."""

    def __init__(self) -> None:
        self.enqueued: list[Message] = []

    def enqueue(self, message: Message) -> None:
        self.enqueued.append(message)


class Journal:
    """The journal's dead-letter writes, recorded; each returns a token for its write."""

    def __init__(self) -> None:
        self.writes: list[tuple[Any, ...]] = []

    def move(self, key: str, message_id: str, to_key: str, copy: Message) -> str:
        self.writes.append(("move", key, message_id, to_key, copy.message_id))
        return "moved"

    def remove(self, key: str, message_id: str) -> str:
        self.writes.append(("remove", key, message_id))
        return "removed"


class World:
    """DeadLetters whose queues and journal record what they are asked."""

    def __init__(self, expired: str = "drop", journal: Journal | None = None) -> None:
        self.queues: dict[str, Queue] = {}
        self.counters = DeliveryCounters()
        self.traffic = Traffic()
        self.letters = DeadLetters(
            DeliveryPolicy(expired=expired),
            self.counters,
            self.traffic,
            Ids("n0"),
            lambda destination: self.queues.setdefault(destination, Queue()),
            journal,
        )


def original(destination: str = "/queue/orders", persistent: bool = False) -> Message:
    return Message(
        destination, "m1", (("k", "v"), ("dead-letter-reason", "old")), b"body", 0.0, 2, persistent
    )


def test_a_dead_letter_is_a_new_message_saying_where_it_came_from_and_why() -> None:
    """The copy has a new id, the original headers but the dead-letter ones, and three new ones."""
    world = World()
    assert world.letters.dead_letter(original(), REJECTED) is None
    [copy] = world.queues["/queue/DLQ.orders"].enqueued
    assert copy.message_id == "n0-1" and copy.redeliveries == 0 and not copy.persistent
    assert copy.headers == (
        ("k", "v"),
        ("original-destination", "/queue/orders"),
        ("original-message-id", "m1"),
        ("dead-letter-reason", "rejected"),
    )
    assert world.counters.dead_lettered == 1
    assert world.traffic.destinations["/queue/orders"].messages_dead_lettered == 1


def test_a_topic_message_goes_to_the_dead_letter_queue_of_its_topic_name() -> None:
    """A subscription's queue dead-letters to /queue/ + prefix + the topic's name."""
    world = World()
    world.letters.dead_letter(original("/topic/prices.eur"), REJECTED)
    assert list(world.queues) == ["/queue/DLQ.prices.eur"]


def test_what_fails_in_a_dead_letter_queue_is_discarded() -> None:
    """Nothing circulates for ever: a dead letter that fails again is dropped and counted."""
    journal = Journal()
    world = World(journal=journal)
    dropped = world.letters.dead_letter(original("/queue/DLQ.orders", True), REJECTED, "key")
    assert dropped == "removed" and world.queues == {}
    assert journal.writes == [("remove", "key", "m1")]
    assert world.counters.discarded == 1
    assert world.traffic.destinations["/queue/DLQ.orders"].messages_dropped == 1


def test_a_stored_message_moves_to_its_dead_letter_queue_in_the_store() -> None:
    """A persistent message kept under a key is moved to the copy's key in one write."""
    journal = Journal()
    world = World(journal=journal)
    moved = world.letters.dead_letter(original(persistent=True), REJECTED, "/queue/orders")
    [copy] = world.queues["/queue/DLQ.orders"].enqueued
    assert moved == "moved" and copy.persistent
    assert journal.writes == [("move", "/queue/orders", "m1", "/queue/DLQ.orders", "n0-1")]


def test_a_message_not_kept_in_the_store_leaves_no_write() -> None:
    """Non-persistent, or without a key, the dead letter lives in memory only."""
    journal = Journal()
    world = World(journal=journal)
    world.letters.dead_letter(original(persistent=False), REJECTED, "/queue/orders")
    world.letters.dead_letter(original(persistent=True), REJECTED, None)
    assert journal.writes == []
    assert not any(copy.persistent for copy in world.queues["/queue/DLQ.orders"].enqueued)


def test_expired_at_routing_is_counted_and_dropped_or_dead_lettered() -> None:
    """--expired drop counts the message; --expired dead-letter also moves it, reason expired."""
    dropping = World(expired="drop")
    dropping.letters.expired(original())
    assert dropping.counters.expired == 1 and dropping.queues == {}
    keeping = World(expired="dead-letter")
    keeping.letters.expired(original())
    [copy] = keeping.queues["/queue/DLQ.orders"].enqueued
    assert ("dead-letter-reason", EXPIRED) in copy.headers
    assert keeping.traffic.destinations["/queue/orders"].messages_expired == 1
