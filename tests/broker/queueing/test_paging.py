"""
Paged queues (stompbroker.broker.queueing.paging): past the memory budget, a queue's
persistent messages stay in the store only and are read back as it drains.

Each broker test runs on a MemoryStore and on an SQLite store with a synchronous
writer on a task.Clock (tests/support/persistence.py), with a budget of 0 bytes
and a read-ahead of 4 messages, so that every queue pages past its fourth message.
"""

from __future__ import annotations

from typing import Any

import pytest
from twisted.internet.defer import fail

from stompbroker.broker.features.policies import parse_policy
from stompbroker.broker.flow.broker_limits import Limits
from stompbroker.broker.management.operations import Management
from stompbroker.broker.queueing.paging import PagedPart, PagingBudget
from stompbroker.broker.queueing.queues import PAGE_RETRY, SCAN_PAGES
from stompbroker.broker.service import Broker
from stompbroker.broker.store.base import StoredMessage, StoreError
from stompbroker.protocol.message import Message
from tests.support.broker import Inbox
from tests.support.persistence import PERSISTENT, Setup, send
from tests.support.store import result_of

READ_AHEAD = 4
PAGING = Limits(queue_memory=0, read_ahead=READ_AHEAD)


def paging_broker(setup: Setup) -> Broker:
    return setup.broker(limits=PAGING)


def settle(setup: Setup, turns: int = 40) -> None:
    """Let the store commit and pages come in (each page takes a turn or two)."""
    for _ in range(turns):
        setup.clock.advance(0)


def bodies(count: int, start: int = 0) -> list[bytes]:
    return [b"m%03d" % n for n in range(start, start + count)]


def ack_all(broker: Broker, inbox: Inbox, setup: Setup, acked: int = 0) -> int:
    """
    Acknowledge what the inbox got from index ``acked`` on, until it gets no more.

    :returns: how many it has got (and settled) now.
    """
    settle(setup)
    while acked < len(inbox.received):
        for message in inbox.received[acked:]:
            broker.ack(inbox.connection, message.message_id, subscriber=inbox)
            acked += 1
        settle(setup)
    return acked


# -- the parts, without a broker --------------------------------------------------------


@pytest.mark.parametrize("limit, read_ahead", [(-1, 10), (0, 0), (10, -5)])
def test_a_budget_out_of_range_is_refused(limit: int, read_ahead: int) -> None:
    """A negative budget or a read-ahead under one message is a clear error."""
    with pytest.raises(ValueError, match="must be"):
        PagingBudget(limit, read_ahead)


def test_a_queue_pages_only_past_the_budget_and_its_read_ahead() -> None:
    """Both must be passed: the budget spent, and the queue holding its read-ahead."""
    budget = PagingBudget(100, read_ahead=3)
    assert not budget.full(10)
    budget.used = 101
    assert not budget.full(2)
    assert budget.full(3)


def record(sequence: int, body: bytes = b"x") -> StoredMessage:
    return StoredMessage("/queue/q", sequence, f"id-{sequence}", "/queue/q", (), body)


def test_a_part_is_empty_once_a_page_comes_short_with_nothing_paged_meanwhile() -> None:
    """A short page ends the part; messages paged out while it was read keep it going."""
    part = PagedPart(first_id="id-1")
    for n in range(1, 4):
        part.page_out(Message("/queue/q", f"id-{n}", (), b"abc"))
    assert (part.count, part.size) == (3, 9)
    part.asked()
    part.page_out(Message("/queue/q", "id-4", (), b"abc"))
    assert not part.came([record(1, b"abc"), record(2, b"abc")], 2)
    assert (part.count, part.size, part.after, part.first_id) == (2, 6, 2, None)
    part.asked()
    assert part.came([record(3, b"abc"), record(4, b"abc")], 2)
    assert (part.count, part.size) == (0, 0)


def test_a_count_that_erred_high_is_put_right_by_a_short_page() -> None:
    """An add that failed was counted in: the last page reads fewer and ends the part."""
    part = PagedPart(count=5, size=50, after=10)
    part.asked()
    assert part.came([record(11)], 5)
    assert (part.count, part.size) == (0, 0)


# -- a broker whose queues page -------------------------------------------------------------


def test_past_the_read_ahead_persistent_messages_stay_on_disk(setup: Setup) -> None:
    """Memory holds the read-ahead; the depth counts the rest; the store holds them all."""
    broker = paging_broker(setup)
    send(broker, "/queue/q", *bodies(20))
    settle(setup)
    queue = broker.engine.queues["/queue/q"]
    assert len(queue.pending) == READ_AHEAD
    assert queue.paged is not None and queue.paged.count == 16
    assert queue.depth() == 20
    assert len(setup.stored_ids()["/queue/q"]) == 20


def test_a_paged_queue_drains_every_message_once_in_order(setup: Setup) -> None:
    """A consumer gets the paged messages as the queue reads them back, in order."""
    broker = paging_broker(setup)
    send(broker, "/queue/q", *bodies(30))
    settle(setup)
    inbox = setup.subscribe(broker, prefetch=3)
    ack_all(broker, inbox, setup)
    assert inbox.bodies() == bodies(30)
    queue = broker.engine.queues.get("/queue/q")
    assert queue is None or (queue.paged is None and not queue.pending)
    assert setup.stored_ids().get("/queue/q", []) == []


def test_messages_sent_while_a_queue_drains_keep_their_place(setup: Setup) -> None:
    """What arrives while the queue pages goes to disk behind the paged part."""
    broker = paging_broker(setup)
    send(broker, "/queue/q", *bodies(10))
    settle(setup)
    inbox = setup.subscribe(broker, prefetch=2)
    settle(setup)
    send(broker, "/queue/q", *bodies(10, start=10))
    ack_all(broker, inbox, setup)
    assert inbox.bodies() == bodies(20)


def test_non_persistent_messages_wait_behind_the_paged_part(setup: Setup) -> None:
    """A message the store does not keep waits in memory after the part, as does what follows."""
    broker = paging_broker(setup)
    send(broker, "/queue/q", *bodies(8))
    send(broker, "/queue/q", b"transient", headers=())
    send(broker, "/queue/q", b"after")
    settle(setup)
    queue = broker.engine.queues["/queue/q"]
    assert queue.depth() == 10
    inbox = setup.subscribe(broker, prefetch=3)
    ack_all(broker, inbox, setup)
    assert inbox.bodies() == [*bodies(8), b"transient", b"after"]


def test_a_restart_reads_the_head_and_counts_the_rest(setup: Setup) -> None:
    """Recovery reads each queue's read-ahead only; the rest is paged in as it drains."""
    broker = paging_broker(setup)
    send(broker, "/queue/q", *bodies(25))
    settle(setup)
    inbox = setup.subscribe(broker, prefetch=2)
    settle(setup)
    assert inbox.bodies() == bodies(2)
    broker = setup.restart(limits=PAGING)
    queue = broker.engine.queues["/queue/q"]
    assert len(queue.pending) == READ_AHEAD
    assert queue.depth() == 25
    after = setup.subscribe(broker, prefetch=5)
    ack_all(broker, after, setup)
    assert after.bodies() == bodies(25)
    # The two delivered before the crash say so; the others do not.
    assert [m.redeliveries > 0 for m in after.received] == [True] * 2 + [False] * 23


def test_a_purge_empties_the_store_of_the_paged_part(setup: Setup) -> None:
    """Purging a paged queue drops what is on disk only too, and counts it."""
    broker = paging_broker(setup)
    send(broker, "/queue/q", *bodies(12))
    settle(setup)
    queue = broker.engine.queues["/queue/q"]
    assert queue.purge() == 12
    settle(setup)
    assert setup.stored_ids().get("/queue/q", []) == []
    assert queue.depth() == 0


def test_a_queue_browser_sees_the_paged_messages(setup: Setup) -> None:
    """Browsing reads the part memory does not hold from the store, and leaves it there."""
    broker = paging_broker(setup)
    send(broker, "/queue/q", *bodies(9))
    settle(setup)
    queue = broker.engine.queues["/queue/q"]
    browsed = queue.browse(7)
    settle(setup)
    assert [m.body for m in result_of(browsed)] == bodies(7)
    waiting = broker.engine.waiting(queue)
    settle(setup)
    assert [m.body for m in result_of(waiting).messages] == bodies(9)
    assert queue.depth() == 9


def test_max_length_counts_the_paged_messages_and_drops_the_head(setup: Setup) -> None:
    """drop-head over a paged queue drops the oldest (in memory), from the store too."""
    broker = paging_broker(setup)
    broker.engine.policies.set(parse_policy("p", {"pattern": "q", "max-length": 6}))
    send(broker, "/queue/q", *bodies(10))
    settle(setup)
    queue = broker.engine.queues["/queue/q"]
    assert queue.depth() == 6
    inbox = setup.subscribe(broker, prefetch=3)
    ack_all(broker, inbox, setup)
    assert inbox.bodies() == bodies(6, start=4)
    assert setup.stored_ids().get("/queue/q", []) == []


def test_expired_paged_messages_are_expired_when_read(setup: Setup) -> None:
    """A paged message whose time has passed is never delivered; the store forgets it."""
    broker = paging_broker(setup)
    now_ms = int(setup.clock.seconds() * 1000)
    send(broker, "/queue/q", *bodies(6))
    send(broker, "/queue/q", b"short", headers=(*PERSISTENT, ("expires", str(now_ms + 1000))))
    send(broker, "/queue/q", b"last")
    settle(setup)
    setup.clock.advance(5)
    inbox = setup.subscribe(broker, prefetch=2)
    ack_all(broker, inbox, setup)
    assert inbox.bodies() == [*bodies(6), b"last"]
    assert setup.stored_ids().get("/queue/q", []) == []


def test_a_selector_scans_forward_through_pages(setup: Setup) -> None:
    """A consumer whose selector matches nothing in memory gets what matches a few pages on."""
    broker = paging_broker(setup)
    send(broker, "/queue/q", *bodies(READ_AHEAD * SCAN_PAGES - 2))
    send(broker, "/queue/q", b"wanted", headers=(*PERSISTENT, ("kind", "x")))
    settle(setup)
    inbox = setup.subscribe(broker, prefetch=5, headers={"selector": "kind = 'x'"})
    settle(setup)
    assert inbox.bodies() == [b"wanted"]


def test_a_selector_scans_no_further_than_a_few_read_aheads(setup: Setup) -> None:
    """What matches only past SCAN_PAGES read-aheads waits for the others to drain."""
    broker = paging_broker(setup)
    send(broker, "/queue/q", *bodies(READ_AHEAD * SCAN_PAGES + 4))
    send(broker, "/queue/q", b"wanted", headers=(*PERSISTENT, ("kind", "x")))
    settle(setup)
    inbox = setup.subscribe(broker, prefetch=5, headers={"selector": "kind = 'x'"})
    settle(setup)
    assert inbox.bodies() == []
    queue = broker.engine.queues["/queue/q"]
    assert len(queue.pending) <= READ_AHEAD * SCAN_PAGES
    others = setup.subscribe(broker, prefetch=50)
    ack_all(broker, others, setup)
    assert inbox.bodies() == [b"wanted"]


def test_a_priority_above_the_paged_part_goes_before_it(setup: Setup) -> None:
    """A message of a higher priority than any on disk stays in memory and goes first."""
    broker = paging_broker(setup)
    send(broker, "/queue/q", *bodies(8))
    send(broker, "/queue/q", b"urgent", headers=(*PERSISTENT, ("priority", "9")))
    settle(setup)
    queue = broker.engine.queues["/queue/q"]
    assert queue.depth() == 9 and len(queue.pending) == READ_AHEAD + 1
    inbox = setup.subscribe(broker, prefetch=1)
    ack_all(broker, inbox, setup)
    assert inbox.bodies() == [b"urgent", *bodies(8)]


def test_a_priority_the_paged_part_holds_waits_for_its_page(setup: Setup) -> None:
    """A high-priority message paged out keeps its level's order: the next one waits behind it."""
    broker = paging_broker(setup)
    send(broker, "/queue/q", *bodies(6))
    high = (*PERSISTENT, ("priority", "7"))
    send(broker, "/queue/q", b"high-1", headers=high)
    send(broker, "/queue/q", b"m-more")
    send(broker, "/queue/q", b"high-2", headers=high)
    settle(setup)
    assert broker.engine.queues["/queue/q"].depth() == 9
    inbox = setup.subscribe(broker, prefetch=1)
    ack_all(broker, inbox, setup)
    got = inbox.bodies()
    assert sorted(got) == sorted([*bodies(6), b"high-1", b"m-more", b"high-2"])
    assert got.index(b"high-1") < got.index(b"high-2")


def test_a_durable_subscription_backlog_pages(setup: Setup) -> None:
    """A durable subscription's queue pages as a /queue/ does, and drains in order."""
    broker = paging_broker(setup)
    inbox = setup.subscribe(broker, "/topic/t", durable=("c", "d"), prefetch=2)
    broker.unsubscribe(inbox)
    settle(setup)
    send(broker, "/topic/t", *bodies(15))
    settle(setup)
    queue = broker.engine.durable[("c", "d")]
    assert len(queue.pending) == READ_AHEAD and queue.depth() == 15
    again = setup.subscribe(broker, "/topic/t", durable=("c", "d"), prefetch=2)
    ack_all(broker, again, setup)
    assert again.bodies() == bodies(15)


def test_stats_count_the_paged_messages(setup: Setup) -> None:
    """The depth the engine reports (for /stats and /api) counts what is on disk only."""
    broker = paging_broker(setup)
    send(broker, "/queue/q", *bodies(11))
    settle(setup)
    assert broker.engine.depth("/queue/q") == 11


def test_the_budget_comes_back_as_queues_drain(setup: Setup) -> None:
    """What a queue counted in the budget goes out as it hands messages out."""
    broker = setup.broker(limits=Limits(queue_memory=10**9, read_ahead=READ_AHEAD))
    send(broker, "/queue/q", *bodies(5))
    settle(setup)
    budget = broker.engine.paging
    assert budget.used > 0
    inbox = setup.subscribe(broker, prefetch=10)
    ack_all(broker, inbox, setup)
    assert budget.used == 0


def test_without_a_store_nothing_pages() -> None:
    """A broker without a store has no budget: memory holds everything."""
    from twisted.internet.task import Clock

    broker = Broker(Clock(), limits=PAGING)
    assert broker.engine.paging is None


def test_the_management_api_browses_moves_and_purges_a_paged_queue(setup: Setup) -> None:
    """Browse reads past memory; move takes what memory holds, again and again; depth counts all."""
    broker = paging_broker(setup)
    send(broker, "/queue/a", *bodies(10))
    settle(setup)
    queues = Management(broker).queues
    browsed = queues.browse("/queue/a", 8)
    settle(setup)
    assert [m.body for m in result_of(browsed).messages] == bodies(8)
    assert Management(broker).destination("/queue/a").depth == 10
    moved = 0
    for _ in range(10):
        moved += queues.move("/queue/a", "/queue/b", 10).count
        settle(setup)
    assert moved == 10
    inbox = setup.subscribe(broker, "/queue/b", prefetch=3)
    ack_all(broker, inbox, setup)
    assert inbox.bodies() == bodies(10)
    assert setup.stored_ids().get("/queue/a", []) == []


def test_a_page_the_store_cannot_read_is_asked_for_again(setup: Setup) -> None:
    """A failed read is logged and asked for again (at the next dispatch, or after PAGE_RETRY)."""
    broker = paging_broker(setup)
    send(broker, "/queue/q", *bodies(8))
    settle(setup)
    store = setup.store
    real = store.page
    failures = []

    def failing(*args: Any) -> Any:
        store.page = real
        failures.append(args)
        return fail(StoreError("disk on fire"))

    store.page = failing
    inbox = setup.subscribe(broker, prefetch=20)
    settle(setup)
    assert len(failures) == 1 and inbox.bodies() == bodies(READ_AHEAD)
    setup.clock.advance(PAGE_RETRY)
    ack_all(broker, inbox, setup)
    assert inbox.bodies() == bodies(8)


def test_a_durable_backlog_is_paged_after_a_restart(setup: Setup) -> None:
    """Recovery reads a durable subscription's head too, and counts the rest."""
    broker = paging_broker(setup)
    inbox = setup.subscribe(broker, "/topic/t", durable=("c", "d"), prefetch=2)
    broker.unsubscribe(inbox)
    send(broker, "/topic/t", *bodies(12))
    broker = setup.restart(limits=PAGING)
    queue = broker.engine.durable[("c", "d")]
    assert len(queue.pending) == READ_AHEAD and queue.depth() == 12
    again = setup.subscribe(broker, "/topic/t", durable=("c", "d"), prefetch=2)
    ack_all(broker, again, setup)
    assert again.bodies() == bodies(12)


def test_nacked_messages_of_a_paged_queue_come_back_or_go_to_the_dead_letters(
    setup: Setup,
) -> None:
    """A NACK puts the message back for a redelivery; requeue:false dead-letters it."""
    broker = paging_broker(setup)
    send(broker, "/queue/q", *bodies(8))
    settle(setup)
    inbox = setup.subscribe(broker, prefetch=1)
    settle(setup)
    broker.nack(inbox.connection, inbox.received[0].message_id, subscriber=inbox, requeue=False)
    settle(setup)
    assert inbox.received[1].body == b"m001"
    broker.nack(inbox.connection, inbox.received[1].message_id, subscriber=inbox)
    settled = 2
    for _ in range(20):
        setup.clock.advance(5)
        settled = ack_all(broker, inbox, setup, settled)
    got = inbox.bodies()
    assert sorted(got[2:]) == bodies(7, start=1)
    assert [m.redeliveries for m in inbox.received[2:] if m.body == b"m001"] == [1]
    stored = setup.stored_ids()
    assert stored.get("/queue/q", []) == [] and len(stored["/queue/DLQ.q"]) == 1
