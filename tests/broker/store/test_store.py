"""
The contract of :class:`stompbroker.broker.store.base.IMessageStore`, run against every store.

The same tests run against :class:`MemoryStore` and :class:`SQLiteStore` (in its
two durable sync modes), as crossbar runs one wildcard suite against two
implementations.  The SQLite store runs here without a thread: its writer is a
synchronous executor and its timers a ``task.Clock``, so every test is
deterministic; ``test_sqlite_store.py`` covers what only SQLite does, including the
real writer thread.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from attrs import define
from hypothesis import given, settings
from hypothesis import strategies as st
from twisted.internet import task
from twisted.internet.defer import Deferred
from zope.interface.verify import verifyObject

from stompbroker.broker.store.base import (
    DuplicateMessage,
    DurableSubscription,
    IMessageStore,
    RecoveredState,
    ScheduledRecord,
    StoredMessage,
    StoreNotOpen,
)
from stompbroker.broker.store.memory import MemoryStore
from stompbroker.protocol.frames import Headers
from tests.support.store import Sent, open_sqlite, result_of, sent, sqlite_store


@define
class Harness:
    """
    One store under test, and the way to let its pending work finish.

    :ivar clock: the SQLite store's clock; ``None`` for the memory store.
    """

    store: Any
    clock: task.Clock | None

    def settle(self, deferred: Deferred) -> Any:
        """Let the store commit what is pending, then return what ``deferred`` fired with."""
        if self.clock is not None:
            self.clock.advance(1)
        return result_of(deferred)

    def recover(self) -> RecoveredState:
        """:returns: the store's contents."""
        return self.settle(self.store.recover())

    def add(self, queue: str, *messages: Sent) -> list[StoredMessage]:
        """Add messages to one key and wait for them to be stored."""
        pending = [self.store.add(queue, message) for message in messages]
        return [self.settle(deferred) for deferred in pending]


@pytest.fixture(params=["memory", "sqlite-batch", "sqlite-always"])
def harness(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Harness]:
    """Every store that keeps the whole contract, opened."""
    if request.param == "memory":
        under_test = Harness(MemoryStore(), None)
        under_test.store.open()
    else:
        clock = task.Clock()
        sync = request.param.split("-")[1]
        under_test = Harness(open_sqlite(tmp_path / "data", clock, sync), clock)
    yield under_test
    closing = under_test.store.close()
    under_test.settle(closing)


def message_ids(messages: tuple[StoredMessage, ...]) -> list[str]:
    """:returns: the ids of ``messages``, in order."""
    return [message.message_id for message in messages]


def test_stores_provide_the_interface(harness: Harness) -> None:
    """Each store implements every method of IMessageStore."""
    assert verifyObject(IMessageStore, harness.store)


def test_new_store_recovers_nothing(harness: Harness) -> None:
    """A store that was never written to recovers no queue and no subscription."""
    assert harness.recover() == RecoveredState(queues={}, subscriptions=(), backlogs={})


def test_add_fires_with_the_stored_record(harness: Harness) -> None:
    """add() fires with the message as filed: its fields, a sequence, and no delivery yet."""
    message = Sent("/queue/orders", "m-1", (("a", "1"), ("a", "2")), b"\x00body", 1700.5)
    (stored,) = harness.add("/queue/orders", message)
    assert stored == StoredMessage(
        queue="/queue/orders",
        sequence=stored.sequence,
        message_id="m-1",
        destination="/queue/orders",
        headers=(("a", "1"), ("a", "2")),
        body=b"\x00body",
        expires=1700.5,
    )
    assert (stored.delivered, stored.redelivery_count, stored.redeliveries) == (False, 0, 0)
    assert harness.recover().queues == {"/queue/orders": (stored,)}


def test_recovery_returns_each_queue_in_insertion_order(harness: Harness) -> None:
    """Recovery gives each key its messages in the order they were added, however interleaved."""
    pending = []
    for index in range(30):
        queue = f"/queue/q{index % 3}"
        pending.append(harness.store.add(queue, sent(f"m-{index}", queue)))
    for deferred in pending:
        harness.settle(deferred)
    recovered = harness.recover()
    assert list(recovered.queues) == ["/queue/q0", "/queue/q1", "/queue/q2"]
    for offset in range(3):
        expected = [f"m-{index}" for index in range(offset, 30, 3)]
        assert message_ids(recovered.queues[f"/queue/q{offset}"]) == expected


def test_sequences_increase_in_call_order(harness: Harness) -> None:
    """Each message gets a higher sequence than the one added before it, under any key."""
    stored = harness.add("/queue/a", sent("m-1")) + harness.add("/queue/b", sent("m-2"))
    assert stored[0].sequence < stored[1].sequence


def test_remove_forgets_only_that_message(harness: Harness) -> None:
    """remove() (an ACK or an expiry) deletes one message and keeps the rest in order."""
    harness.add("/queue/orders", sent("m-1"), sent("m-2"), sent("m-3"))
    harness.settle(harness.store.remove("/queue/orders", "m-2"))
    assert message_ids(harness.recover().queues["/queue/orders"]) == ["m-1", "m-3"]


def test_a_queue_without_messages_is_not_recovered(harness: Harness) -> None:
    """A key whose last message was removed is absent from the recovered queues."""
    harness.add("/queue/orders", sent("m-1"))
    harness.settle(harness.store.remove("/queue/orders", "m-1"))
    assert harness.recover().queues == {}


def test_operations_on_unknown_messages_change_nothing(harness: Harness) -> None:
    """Removing or marking a message the key does not hold is not an error."""
    harness.add("/queue/orders", sent("m-1"))
    before = harness.recover()
    assert harness.settle(harness.store.remove("/queue/orders", "m-9")) is None
    assert harness.settle(harness.store.remove("/queue/other", "m-1")) is None
    assert harness.settle(harness.store.mark_delivered("/queue/orders", "m-9")) is None
    assert harness.recover() == before


def test_mark_delivered_sets_delivered_then_counts_redeliveries(harness: Harness) -> None:
    """The first delivery sets the delivered flag; each later one counts a redelivery."""
    harness.add("/queue/orders", sent("m-1"), sent("m-2"))
    harness.settle(harness.store.mark_delivered("/queue/orders", "m-1"))
    (first, untouched) = harness.recover().queues["/queue/orders"]
    assert (first.delivered, first.redelivery_count, first.redeliveries) == (True, 0, 1)
    assert (untouched.delivered, untouched.redelivery_count) == (False, 0)
    harness.settle(harness.store.mark_delivered("/queue/orders", "m-1"))
    harness.settle(harness.store.mark_delivered("/queue/orders", "m-1"))
    (first, _) = harness.recover().queues["/queue/orders"]
    assert (first.delivered, first.redelivery_count, first.redeliveries) == (True, 2, 3)


def test_marking_keeps_the_order(harness: Harness) -> None:
    """A delivered message keeps its place in its queue."""
    harness.add("/queue/orders", sent("m-1"), sent("m-2"))
    harness.settle(harness.store.mark_delivered("/queue/orders", "m-1"))
    assert message_ids(harness.recover().queues["/queue/orders"]) == ["m-1", "m-2"]


#: The dead-letter copy the broker makes of ``m-1`` from ``/queue/orders``.
DEAD_LETTER = Sent(
    "/queue/DLQ.orders",
    "d-1",
    (("original-message-id", "m-1"), ("dead-letter-reason", "rejected")),
    b"m-1",
)


def test_move_swaps_a_message_for_its_dead_letter_copy(harness: Harness) -> None:
    """move() removes the original and files the copy at the end of its key, undelivered."""
    harness.add("/queue/DLQ.orders", sent("old", "/queue/DLQ.orders"))
    (original, kept) = harness.add("/queue/orders", sent("m-1"), sent("m-2"))
    harness.settle(harness.store.mark_delivered("/queue/orders", "m-1"))
    harness.settle(harness.store.mark_delivered("/queue/orders", "m-1"))
    moving = harness.store.move("/queue/orders", "m-1", "/queue/DLQ.orders", DEAD_LETTER)
    moved = harness.settle(moving)
    assert moved == StoredMessage(
        queue="/queue/DLQ.orders",
        sequence=moved.sequence,
        message_id="d-1",
        destination="/queue/DLQ.orders",
        headers=DEAD_LETTER.headers,
        body=b"m-1",
    )
    assert moved.sequence > kept.sequence > original.sequence
    recovered = harness.recover()
    assert message_ids(recovered.queues["/queue/orders"]) == ["m-2"]
    assert recovered.queues["/queue/DLQ.orders"][1] == moved
    assert message_ids(recovered.queues["/queue/DLQ.orders"]) == ["old", "d-1"]


def test_move_files_the_copy_even_if_the_original_is_gone(harness: Harness) -> None:
    """A dead-letter copy is never lost because its original was removed already."""
    harness.settle(harness.store.move("/queue/orders", "m-1", "/queue/DLQ.orders", DEAD_LETTER))
    recovered = harness.recover()
    assert list(recovered.queues) == ["/queue/DLQ.orders"]
    assert message_ids(recovered.queues["/queue/DLQ.orders"]) == ["d-1"]


def test_move_onto_a_key_that_holds_the_id_fails_and_changes_nothing(harness: Harness) -> None:
    """move() to a key already holding the copy's id fails with DuplicateMessage; nothing moves."""
    harness.add("/queue/orders", sent("m-1"))
    harness.add("/queue/DLQ.orders", DEAD_LETTER)
    before = harness.recover()
    with pytest.raises(DuplicateMessage):
        harness.settle(harness.store.move("/queue/orders", "m-1", "/queue/DLQ.orders", DEAD_LETTER))
    with pytest.raises(DuplicateMessage):
        harness.settle(harness.store.move("/queue/orders", "m-1", "/queue/orders", sent("m-1")))
    assert harness.recover() == before


def test_duplicate_id_under_one_key_fails_and_keeps_the_first(harness: Harness) -> None:
    """A second add() of one id to one key fails with DuplicateMessage; the first copy stays."""
    harness.add("/queue/orders", sent("m-1"))
    with pytest.raises(DuplicateMessage, match="m-1"):
        harness.settle(harness.store.add("/queue/orders", sent("m-1", body=b"again")))
    (kept,) = harness.recover().queues["/queue/orders"]
    assert kept.body == b"m-1"


def test_a_failed_add_does_not_disturb_its_neighbours(harness: Harness) -> None:
    """Adds called together with a duplicate are stored although the duplicate fails."""
    harness.add("/queue/orders", sent("m-1"))
    pending = [
        harness.store.add("/queue/orders", sent("m-0")),
        harness.store.add("/queue/orders", sent("m-1")),
        harness.store.add("/queue/orders", sent("m-2")),
    ]
    harness.settle(pending[0])
    with pytest.raises(DuplicateMessage):
        harness.settle(pending[1])
    harness.settle(pending[2])
    assert message_ids(harness.recover().queues["/queue/orders"]) == ["m-1", "m-0", "m-2"]


def test_one_id_under_two_keys_is_two_messages(harness: Harness) -> None:
    """A topic message for two durable subscriptions is stored once under each key."""
    harness.add("sub-a", sent("m-1", "/topic/prices"))
    harness.add("sub-b", sent("m-1", "/topic/prices"))
    harness.settle(harness.store.remove("sub-a", "m-1"))
    recovered = harness.recover()
    assert list(recovered.queues) == ["sub-b"]
    assert message_ids(recovered.queues["sub-b"]) == ["m-1"]


def test_durable_subscriptions_recover_with_their_backlogs(harness: Harness) -> None:
    """Durable subscriptions come back in creation order, their messages apart from the queues."""
    harness.settle(harness.store.add_subscription("sub-b", "/topic/b.#", (("selector", "x"),)))
    harness.settle(harness.store.add_subscription("sub-a", "/topic/a"))
    harness.add("sub-a", sent("m-1", "/topic/a"), sent("m-2", "/topic/a"))
    harness.add("/queue/orders", sent("m-3"))
    recovered = harness.recover()
    assert recovered.subscriptions == (
        DurableSubscription("sub-b", "/topic/b.#", (("selector", "x"),)),
        DurableSubscription("sub-a", "/topic/a"),
    )
    assert {name: message_ids(found) for name, found in recovered.backlogs.items()} == {
        "sub-b": [],
        "sub-a": ["m-1", "m-2"],
    }
    assert list(recovered.queues) == ["/queue/orders"]


def test_adding_a_subscription_again_updates_it_in_place(harness: Harness) -> None:
    """add_subscription() for a known name changes its destination and headers, not its backlog."""
    harness.settle(harness.store.add_subscription("sub-a", "/topic/a"))
    harness.settle(harness.store.add_subscription("sub-b", "/topic/b"))
    harness.add("sub-a", sent("m-1", "/topic/a"))
    harness.settle(harness.store.add_subscription("sub-a", "/topic/c", (("ack", "client"),)))
    recovered = harness.recover()
    assert recovered.subscriptions == (
        DurableSubscription("sub-a", "/topic/c", (("ack", "client"),)),
        DurableSubscription("sub-b", "/topic/b"),
    )
    assert message_ids(recovered.backlogs["sub-a"]) == ["m-1"]


def test_remove_subscription_drops_its_backlog(harness: Harness) -> None:
    """remove_subscription() deletes the subscription and every message filed under it."""
    harness.settle(harness.store.add_subscription("sub-a", "/topic/a"))
    harness.add("sub-a", sent("m-1", "/topic/a"), sent("m-2", "/topic/a"))
    harness.add("/queue/orders", sent("m-1"))
    harness.settle(harness.store.remove_subscription("sub-a"))
    harness.settle(harness.store.remove_subscription("never-made"))
    recovered = harness.recover()
    assert (recovered.subscriptions, recovered.backlogs) == ((), {})
    assert message_ids(recovered.queues["/queue/orders"]) == ["m-1"]


def test_operations_on_a_closed_store_fail(harness: Harness) -> None:
    """After close(), every operation fails with StoreNotOpen, and open() does not revive it."""
    harness.settle(harness.store.close())
    operations = [
        harness.store.recover(),
        harness.store.add("/queue/orders", sent("m-1")),
        harness.store.remove("/queue/orders", "m-1"),
        harness.store.mark_delivered("/queue/orders", "m-1"),
        harness.store.move("/queue/orders", "m-1", "/queue/DLQ.orders", DEAD_LETTER),
        harness.store.add_subscription("sub-a", "/topic/a"),
        harness.store.remove_subscription("sub-a"),
        harness.store.schedule(ScheduledRecord("m-1", "/queue/a", (), b"", 1)),
        harness.store.unschedule("m-1"),
        harness.store.retain("/topic/a", sent("m-1", "/topic/a")),
        harness.store.unretain("/topic/a"),
    ]
    for deferred in operations:
        with pytest.raises(StoreNotOpen):
            harness.settle(deferred)
    with pytest.raises(StoreNotOpen):
        harness.store.open()
    assert harness.settle(harness.store.close()) is None


def test_scheduled_messages_are_kept_updated_and_forgotten(harness: Harness) -> None:
    """
    schedule() keeps a record by message-id, a second call updates its schedule in place
    (its order kept), and unschedule() forgets it; none of it is a queue's message.
    """
    first = ScheduledRecord("m-1", "/queue/a", (("x-delay", "5"),), b"1", 1000, 100, 3, 0)
    second = ScheduledRecord("m-2", "/topic/b", (), b"2", 900)
    for record in (first, second):
        harness.settle(harness.store.schedule(record))
    moved_on = ScheduledRecord("m-1", "/queue/a", (("x-delay", "5"),), b"1", 1100, 100, 2, 1)
    harness.settle(harness.store.schedule(moved_on))
    recovered = harness.recover()
    assert recovered.scheduled == (moved_on, second)
    assert recovered.queues == {}
    harness.settle(harness.store.unschedule("m-1"))
    harness.settle(harness.store.unschedule("never-scheduled"))
    assert harness.recover().scheduled == (second,)


def test_retained_messages_are_one_per_topic_in_the_order_retained(harness: Harness) -> None:
    """retain() replaces a topic's message, which then counts as newest; unretain() drops it."""
    for topic, message_id in (("/topic/a", "m-1"), ("/topic/b", "m-2"), ("/topic/a", "m-3")):
        harness.settle(harness.store.retain(topic, sent(message_id, topic, expires=7.5)))
    retained = harness.recover().retained
    assert [(m.queue, m.message_id, m.body, m.expires) for m in retained] == [
        ("/topic/b", "m-2", b"m-2", 7.5),
        ("/topic/a", "m-3", b"m-3", 7.5),
    ]
    harness.settle(harness.store.unretain("/topic/b"))
    harness.settle(harness.store.unretain("/topic/none"))
    assert [m.message_id for m in harness.recover().retained] == ["m-3"]
    assert harness.recover().queues == {}


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
def test_operations_before_open_fail(kind: str, tmp_path: Path) -> None:
    """A store must be opened before use: an operation on a new store fails with StoreNotOpen."""
    if kind == "memory":
        store: Any = MemoryStore()
    else:
        store = sqlite_store(tmp_path)
    with pytest.raises(StoreNotOpen):
        result_of(store.add("/queue/orders", sent("m-1")))
    assert result_of(store.close()) is None


HEADER_TEXT = st.text(max_size=20)


def test_any_headers_and_body_come_back_as_they_went_in(harness: Harness) -> None:
    """Header text (any Unicode, colons, newlines, repeats) and body bytes survive storage."""
    count = iter(range(10**6))

    @settings(max_examples=50)
    @given(
        headers=st.lists(st.tuples(HEADER_TEXT, HEADER_TEXT), max_size=5).map(tuple),
        body=st.binary(max_size=200),
        destination=HEADER_TEXT,
    )
    def round_trip(headers: Headers, body: bytes, destination: str) -> None:
        queue = f"/queue/{next(count)}"
        harness.add(queue, Sent(destination, "m", headers, body))
        (stored,) = harness.recover().queues[queue]
        assert (stored.destination, stored.headers, stored.body) == (destination, headers, body)

    round_trip()


# -- the reads of paged queues ---------------------------------------------------------


def test_a_page_reads_a_key_in_order_past_a_sequence_or_from_an_id(harness: Harness) -> None:
    """page() reads one key's messages, others' left out, from an id on or past a sequence."""
    for n in range(6):
        harness.add("/queue/orders", sent(f"m-{n}"))
        harness.add("/queue/other", sent(f"o-{n}", "/queue/other"))
    first = harness.settle(harness.store.page("/queue/orders", 0, "m-2", 3))
    assert [m.message_id for m in first] == ["m-2", "m-3", "m-4"]
    rest = harness.settle(harness.store.page("/queue/orders", first[-1].sequence, None, 10))
    assert [m.message_id for m in rest] == ["m-5"]
    # An id the key no longer holds: from the sequence given instead.
    gone = harness.settle(harness.store.page("/queue/orders", first[0].sequence, "m-9", 2))
    assert [m.message_id for m in gone] == ["m-3", "m-4"]


def test_remove_after_forgets_where_a_page_would_read(harness: Harness) -> None:
    """remove_after() drops a key's messages from the id (or past the sequence) on, no others."""
    for n in range(5):
        harness.add("/queue/orders", sent(f"m-{n}"))
    harness.add("/queue/other", sent("o", "/queue/other"))
    harness.settle(harness.store.remove_after("/queue/orders", 0, "m-2"))
    state = harness.recover()
    assert message_ids(state.queues["/queue/orders"]) == ["m-0", "m-1"]
    assert message_ids(state.queues["/queue/other"]) == ["o"]


def test_transient_messages_are_paged_in_order_among_persistent_ones(harness: Harness) -> None:
    """
    add_transient() files a non-persistent message in the key's one order, marked
    transient; remove_transient() forgets those up to a sequence, and only those.
    """
    harness.add("/queue/orders", sent("p-0"))
    harness.settle(harness.store.add_transient("/queue/orders", sent("t-1")))
    harness.add("/queue/orders", sent("p-2"))
    harness.settle(harness.store.add_transient("/queue/orders", sent("t-3")))
    harness.settle(harness.store.add_transient("/queue/other", sent("t-o", "/queue/other")))
    page = harness.settle(harness.store.page("/queue/orders", 0, None, 10))
    assert [(m.message_id, m.transient) for m in page] == [
        ("p-0", False),
        ("t-1", True),
        ("p-2", False),
        ("t-3", True),
    ]
    assert page[1].body == b"t-1" and page[1].redeliveries == 0
    harness.settle(harness.store.remove_transient("/queue/orders", page[2].sequence))
    left = harness.settle(harness.store.page("/queue/orders", 0, None, 10))
    assert message_ids(left) == ["p-0", "p-2", "t-3"]
    assert message_ids(harness.settle(harness.store.page("/queue/other", 0, None, 10))) == ["t-o"]


@pytest.mark.parametrize("read_ahead", [0, 2])
def test_recovery_drops_every_transient_message(harness: Harness, read_ahead: int) -> None:
    """
    A non-persistent message does not survive a restart: recover() drops the
    transient ones (a key that held only those is gone), with or without a
    read-ahead, and counts only the persistent ones left on disk.
    """
    for n in range(4):
        harness.add("/queue/orders", sent(f"p-{n}"))
        harness.settle(harness.store.add_transient("/queue/orders", sent(f"t-{n}")))
    harness.settle(harness.store.add_transient("/queue/gone", sent("t-g", "/queue/gone")))
    state = harness.settle(harness.store.recover(read_ahead))
    assert "/queue/gone" not in state.queues
    kept = message_ids(state.queues["/queue/orders"])
    if read_ahead:
        assert kept == ["p-0", "p-1"] and state.paged["/queue/orders"].count == 2
    else:
        assert kept == ["p-0", "p-1", "p-2", "p-3"]
    rest = harness.settle(harness.store.page("/queue/orders", 0, None, 10))
    assert message_ids(rest) == ["p-0", "p-1", "p-2", "p-3"]


def test_expired_finds_a_ranges_expired_messages_oldest_first(harness: Harness) -> None:
    """expired() reads where page() would, only what has expired, and the next expiry after."""
    for n, expires in enumerate([5.0, 0.0, 3.0, 50.0, 4.0, 9.0, 2.0]):
        harness.add("/queue/orders", sent(f"m-{n}", expires=expires))
    harness.add("/queue/other", sent("o", "/queue/other", expires=1.0))
    page = harness.settle(harness.store.expired("/queue/orders", 0, "m-1", 6.0, 2))
    first = harness.settle(harness.store.page("/queue/orders", 0, "m-1", 1))
    assert page.start == first[0].sequence - 1
    assert message_ids(page.records) == ["m-2", "m-4"]
    assert page.next_expiry == 9.0
    rest = harness.settle(harness.store.expired("/queue/orders", page.start, None, 6.0, 10))
    assert message_ids(rest.records) == ["m-2", "m-4", "m-6"]
    # It reads; the broker removes what it expires.
    assert len(harness.recover().queues["/queue/orders"]) == 7
    none = harness.settle(harness.store.expired("/queue/orders", 0, None, 100.0, 10))
    assert none.next_expiry == 0.0 and len(none.records) == 6


def test_a_recovery_with_a_read_ahead_reads_heads_and_counts_the_rest(harness: Harness) -> None:
    """recover(read_ahead) gives each key's first messages and a PagedRange for the rest."""
    for n in range(7):
        harness.add("/queue/orders", sent(f"m-{n}", body=b"12345"))
    harness.add("/queue/small", sent("s", "/queue/small"))
    harness.settle(harness.store.mark_delivered("/queue/orders", "m-0"))
    state = harness.settle(harness.store.recover(3))
    assert message_ids(state.queues["/queue/orders"]) == ["m-0", "m-1", "m-2"]
    assert state.queues["/queue/orders"][0].redeliveries == 1
    assert message_ids(state.queues["/queue/small"]) == ["s"]
    left = state.paged["/queue/orders"]
    last = state.queues["/queue/orders"][-1].sequence
    assert (left.count, left.size, left.after) == (4, 20, last)
    assert "/queue/small" not in state.paged
