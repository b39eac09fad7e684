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
from twisted.internet.defer import Deferred, fail
from twisted.internet.task import Clock

from stompbroker.broker.engine import queue_transfer
from stompbroker.broker.features.policies import parse_policy
from stompbroker.broker.flow.broker_limits import Limits
from stompbroker.broker.management.operations import Management
from stompbroker.broker.queueing.delivery import DeliveryPolicy
from stompbroker.broker.queueing.paged_expiry import SWEEP_BATCH, PagedExpiry
from stompbroker.broker.queueing.paging import PagedPart, PagingBudget
from stompbroker.broker.queueing.queues import PAGE_RETRY, SCAN_PAGES
from stompbroker.broker.service import Broker
from stompbroker.broker.store.base import ExpiredPage, StoredMessage, StoreError
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


def stored_page(setup: Setup, key: str = "/queue/q") -> list[StoredMessage]:
    """:returns: what the store holds under a key now, transient rows too (recover() drops them)."""
    reading = setup.store.page(key, 0, None, 10_000)
    setup.settle()
    found: list[StoredMessage] = result_of(reading)
    return found


def mixed(count: int) -> list[tuple[bytes, tuple[tuple[str, str], ...]]]:
    """:returns: bodies and headers, every third message persistent, the others not."""
    return [(b"m%03d" % n, PERSISTENT if n % 3 == 0 else ()) for n in range(count)]


def send_mixed(broker: Broker, count: int) -> None:
    for body, headers in mixed(count):
        send(broker, "/queue/q", body, headers=headers)


def test_non_persistent_messages_page_out_too(setup: Setup) -> None:
    """
    Past the budget a non-persistent message goes to disk as a persistent one
    does, marked transient, in the one paged part, in the order of arrival.
    """
    broker = paging_broker(setup)
    send_mixed(broker, 20)
    settle(setup)
    queue = broker.engine.queues["/queue/q"]
    assert len(queue.pending) == READ_AHEAD
    assert queue.paged is not None
    assert (queue.paged.count, queue.paged.transient) == (16, 11)
    assert queue.depth() == 20
    on_disk = [(m.body, m.transient) for m in stored_page(setup)]
    # The persistent ones memory holds are in the store too; the others are not.
    assert on_disk == [(b"m000", False), (b"m003", False)] + [
        (body, not headers) for body, headers in mixed(20)[READ_AHEAD:]
    ]


def test_a_paged_non_persistent_send_waits_for_no_write(setup: Setup) -> None:
    """
    Its RECEIPT never waited for the disk, and paging keeps it so: the SEND
    gives nothing to wait for while its transient row is not yet written.
    """
    broker = paging_broker(setup)
    send(broker, "/queue/q", *bodies(READ_AHEAD))
    settle(setup)
    sent = send(broker, "/queue/q", *bodies(6, start=READ_AHEAD), headers=())
    assert sent == [None] * 6
    queue = broker.engine.queues["/queue/q"]
    assert queue.paged is not None and queue.paged.transient == 6
    settle(setup)
    assert [m.transient for m in stored_page(setup)] == [False] * READ_AHEAD + [True] * 6


def test_a_mixed_backlog_drains_once_in_order_and_leaves_no_transient_row(setup: Setup) -> None:
    """Pages bring both kinds back in order; a page's transient rows then leave the store."""
    broker = paging_broker(setup)
    send_mixed(broker, 30)
    send(broker, "/queue/q", b"late", headers=())
    settle(setup)
    inbox = setup.subscribe(broker, prefetch=3)
    ack_all(broker, inbox, setup)
    assert inbox.bodies() == [body for body, _ in mixed(30)] + [b"late"]
    assert [m.persistent for m in inbox.received] == [bool(h) for _, h in mixed(30)] + [False]
    assert stored_page(setup) == []
    assert broker.engine.paging.used == 0


def test_only_non_persistent_messages_page_past_the_budget(setup: Setup) -> None:
    """A queue of non-persistent messages alone pages: the budget counts every kind."""
    broker = paging_broker(setup)
    send(broker, "/queue/q", *bodies(12), headers=())
    settle(setup)
    queue = broker.engine.queues["/queue/q"]
    assert len(queue.pending) == READ_AHEAD and queue.depth() == 12
    assert [m.transient for m in stored_page(setup)] == [True] * 8
    inbox = setup.subscribe(broker, prefetch=5)
    ack_all(broker, inbox, setup)
    assert inbox.bodies() == bodies(12)
    assert stored_page(setup) == []


def test_a_restart_drops_the_paged_non_persistent_messages_and_keeps_the_rest(
    setup: Setup,
) -> None:
    """Transient rows do not survive a restart; the persistent ones come back in order."""
    broker = paging_broker(setup)
    send_mixed(broker, 30)
    settle(setup)
    broker = setup.restart(limits=PAGING)
    kept = [body for body, headers in mixed(30) if headers]
    queue = broker.engine.queues["/queue/q"]
    assert queue.depth() == len(kept)
    assert all(not m.transient for m in stored_page(setup))
    inbox = setup.subscribe(broker, prefetch=4)
    ack_all(broker, inbox, setup)
    assert inbox.bodies() == kept


def test_a_purge_drops_the_transient_rows_too(setup: Setup) -> None:
    """Purging a paged queue forgets its part on disk, whatever its kinds."""
    broker = paging_broker(setup)
    send_mixed(broker, 12)
    settle(setup)
    assert broker.engine.queues["/queue/q"].purge() == 12
    settle(setup)
    assert stored_page(setup) == []


def test_a_browser_sees_paged_non_persistent_messages_as_they_were_sent(setup: Setup) -> None:
    """Browsing reads the transient rows as non-persistent messages, and leaves them."""
    broker = paging_broker(setup)
    send_mixed(broker, 9)
    settle(setup)
    browsing = broker.engine.queues["/queue/q"].browse(9)
    settle(setup)
    browsed = result_of(browsing)
    assert [(m.body, m.persistent) for m in browsed] == [(b, bool(h)) for b, h in mixed(9)]
    assert len(stored_page(setup)) == 2 + 5


def test_a_durable_backlog_of_non_persistent_messages_pages(setup: Setup) -> None:
    """A durable subscription's queue pages non-persistent topic messages as a /queue/ does."""
    broker = paging_broker(setup)
    inbox = setup.subscribe(broker, "/topic/t", durable=("c", "d"), prefetch=2)
    broker.unsubscribe(inbox)
    settle(setup)
    send(broker, "/topic/t", *bodies(15), headers=())
    settle(setup)
    queue = broker.engine.durable[("c", "d")]
    assert len(queue.pending) == READ_AHEAD and queue.paged.transient == 11
    again = setup.subscribe(broker, "/topic/t", durable=("c", "d"), prefetch=2)
    ack_all(broker, again, setup)
    assert again.bodies() == bodies(15)
    assert stored_page(setup, queue.store_key) == []


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
    broker = Broker(Clock(), limits=PAGING)
    assert broker.engine.paging is None


def test_the_management_api_browses_moves_and_purges_a_paged_queue(setup: Setup) -> None:
    """Browse reads past memory; one move takes memory and the part on disk; depth counts all."""
    broker = paging_broker(setup)
    send(broker, "/queue/a", *bodies(10))
    settle(setup)
    queues = Management(broker).queues
    browsed = queues.browse("/queue/a", 8)
    settle(setup)
    assert [m.body for m in result_of(browsed).messages] == bodies(8)
    assert Management(broker).destination("/queue/a").depth == 10
    moving = queues.move("/queue/a", "/queue/b", 10)
    settle(setup)
    assert result_of(moving).count == 10
    source = broker.engine.queues["/queue/a"]
    assert source.depth() == 0 and source.paged is None
    inbox = setup.subscribe(broker, "/queue/b", prefetch=3)
    ack_all(broker, inbox, setup)
    assert inbox.bodies() == bodies(10)
    assert setup.stored_ids().get("/queue/a", []) == []


def transfer_batches(monkeypatch: pytest.MonkeyPatch, batch: int) -> None:
    """Make a transfer's batches small, so that a test's few messages take several."""
    monkeypatch.setattr(queue_transfer, "BATCH", batch)


def test_a_move_takes_what_it_is_asked_for_in_batches_in_order_once(
    setup: Setup, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past memory and a batch, a move reads the part a batch per turn; the rest stays, in order."""
    transfer_batches(monkeypatch, 3)
    broker = paging_broker(setup)
    send(broker, "/queue/a", *bodies(25))
    settle(setup)
    pages = []
    real = setup.store.page

    def counted(*args: Any) -> Any:
        pages.append(args[-1])
        return real(*args)

    setup.store.page = counted
    moving = Management(broker).queues.move("/queue/a", "/queue/b", 17)
    settle(setup, 100)
    assert result_of(moving).count == 17
    # Memory held 4; the other 13 came from disk, 3 a batch (the queue then reads its page).
    assert pages[:5] == [3, 3, 3, 3, 1]
    source = broker.engine.queues["/queue/a"]
    assert source.depth() == 8
    stored = setup.stored_ids()
    assert len(stored["/queue/a"]) == 8 and len(stored["/queue/b"]) == 17
    moved = setup.subscribe(broker, "/queue/b", prefetch=3)
    ack_all(broker, moved, setup)
    assert moved.bodies() == bodies(17)
    rest = setup.subscribe(broker, "/queue/a", prefetch=3)
    ack_all(broker, rest, setup)
    assert rest.bodies() == bodies(8, start=17)
    assert setup.stored_ids() == {}


def test_a_copy_reads_through_the_part_and_leaves_it(
    setup: Setup, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A copy of a paged queue copies memory and disk, in order; the queue keeps everything."""
    transfer_batches(monkeypatch, 4)
    broker = paging_broker(setup)
    send(broker, "/queue/a", *bodies(14))
    settle(setup)
    copying = Management(broker).queues.move("/queue/a", "/queue/b", 20, copy=True)
    settle(setup, 100)
    assert result_of(copying).count == 14
    assert broker.engine.queues["/queue/a"].depth() == 14
    for destination in ("/queue/a", "/queue/b"):
        inbox = setup.subscribe(broker, destination, prefetch=3)
        ack_all(broker, inbox, setup)
        assert inbox.bodies() == bodies(14)


def test_a_retry_of_a_paged_dead_letter_queue_sends_back_all_and_leaves_the_rest(
    setup: Setup, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Retry reads the DLQ's part on disk; what it cannot send back stays there, in order."""
    transfer_batches(monkeypatch, 3)
    broker = paging_broker(setup)
    inbox = setup.subscribe(broker, "/queue/q", prefetch=50)
    send(broker, "/queue/q", *bodies(12))
    settle(setup)
    for message in inbox.received:
        broker.nack(inbox.connection, message.message_id, subscriber=inbox, requeue=False)
    broker.unsubscribe(inbox)
    settle(setup)
    queues = Management(broker).queues
    # Two with no original-destination, between the dead letters on disk.
    send(broker, "/queue/r", b"r-1", b"r-2")
    settle(setup)
    assert queues.move("/queue/r", "/queue/DLQ.q", 2).count == 2
    send(broker, "/queue/q", b"late")
    assert queues.find("/queue/DLQ.q").depth() == 14
    retrying = queues.retry("/queue/DLQ.q", 100, targets={"/queue/q"})
    settle(setup, 100)
    acted = result_of(retrying)
    assert (acted.count, acted.left) == (12, 2)
    again = setup.subscribe(broker, "/queue/q", prefetch=5)
    ack_all(broker, again, setup)
    assert again.bodies() == [b"late", *bodies(12)]
    assert len(setup.stored_ids()["/queue/DLQ.q"]) == 2
    left = setup.subscribe(broker, "/queue/DLQ.q", prefetch=5)
    ack_all(broker, left, setup)
    assert left.bodies() == [b"r-1", b"r-2"]


def test_a_purge_during_a_move_ends_it(setup: Setup, monkeypatch: pytest.MonkeyPatch) -> None:
    """The part a purge forgets is not moved: what was moved before stays moved, once."""
    transfer_batches(monkeypatch, 2)
    broker = paging_broker(setup)
    send(broker, "/queue/a", *bodies(12))
    settle(setup)
    queues = Management(broker).queues
    real = setup.store.page
    reads = []

    def purging(*args: Any) -> Any:
        reads.append(args)
        if len(reads) == 2:
            # An operator purges while the move's second batch is read.
            queues.purge("/queue/a")
        return real(*args)

    setup.store.page = purging
    moving = queues.move("/queue/a", "/queue/b", 12)
    settle(setup, 100)
    moved = result_of(moving).count
    assert moved == 4 + 2
    stored = setup.stored_ids()
    assert stored.get("/queue/a", []) == [] and len(stored["/queue/b"]) == moved


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


# -- expiry on disk (stompbroker.broker.queueing.paged_expiry) ----------------------------------


def expiring(setup: Setup, seconds: float) -> tuple[tuple[str, str], ...]:
    """:returns: the headers of a persistent message that expires ``seconds`` from now."""
    at_ms = int((setup.clock.seconds() + seconds) * 1000)
    return (*PERSISTENT, ("expires", str(at_ms)))


def test_paged_messages_expire_without_a_consumer(setup: Setup) -> None:
    """The sweep finds expired messages on disk: the depth drops, the store forgets them."""
    broker = paging_broker(setup)
    send(broker, "/queue/q", *bodies(6))
    send(broker, "/queue/q", *bodies(10, start=100), headers=expiring(setup, 1))
    send(broker, "/queue/q", b"last")
    settle(setup)
    queue = broker.engine.queues["/queue/q"]
    assert queue.depth() == 17 and queue.paged is not None
    setup.clock.advance(2)
    settle(setup)
    assert queue.depth() == 7
    assert broker.engine.depth("/queue/q") == 7
    assert len(setup.stored_ids()["/queue/q"]) == 7
    assert broker.counters.expired == 10
    inbox = setup.subscribe(broker, prefetch=2)
    ack_all(broker, inbox, setup)
    assert inbox.bodies() == [*bodies(6), b"last"]


def test_expired_paged_messages_go_to_the_dead_letter_queue_in_order(setup: Setup) -> None:
    """Under --expired dead-letter, they are moved there in the store, oldest first."""
    broker = setup.broker(limits=PAGING, policy=DeliveryPolicy(expired="dead-letter"))
    send(broker, "/queue/q", *bodies(4))
    send(broker, "/queue/q", *bodies(9, start=100), headers=expiring(setup, 1))
    settle(setup)
    setup.clock.advance(2)
    settle(setup)
    assert broker.engine.queues["/queue/q"].depth() == 4
    stored = setup.stored_ids()
    assert len(stored["/queue/q"]) == 4 and len(stored["/queue/DLQ.q"]) == 9
    inbox = setup.subscribe(broker, "/queue/DLQ.q", prefetch=2)
    ack_all(broker, inbox, setup)
    assert inbox.bodies() == bodies(9, start=100)
    assert {dict(m.headers)["dead-letter-reason"] for m in inbox.received} == {"expired"}


def test_the_sweep_ends_paging_when_all_on_disk_expired(setup: Setup) -> None:
    """A part whose every message expired is empty: the queue stops paging."""
    broker = paging_broker(setup)
    send(broker, "/queue/q", *bodies(4))
    send(broker, "/queue/q", *bodies(5, start=100), headers=expiring(setup, 1))
    settle(setup)
    queue = broker.engine.queues["/queue/q"]
    setup.clock.advance(2)
    settle(setup)
    assert queue.paged is None and queue.depth() == 4
    send(broker, "/queue/q", b"transient", headers=())
    settle(setup)
    assert queue.depth() == 5
    inbox = setup.subscribe(broker, prefetch=9)
    ack_all(broker, inbox, setup)
    assert inbox.bodies() == [*bodies(4), b"transient"]


def test_a_restart_sweeps_what_expired_while_the_broker_was_down(setup: Setup) -> None:
    """Recovery counts the part from an index; the sweep then drops what expired meanwhile."""
    broker = paging_broker(setup)
    send(broker, "/queue/q", *bodies(4))
    send(broker, "/queue/q", *bodies(8, start=100), headers=expiring(setup, 1))
    send(broker, "/queue/q", b"last")
    broker = setup.restart(down=5, limits=PAGING)
    queue = broker.engine.queues["/queue/q"]
    setup.clock.advance(1)
    settle(setup)
    assert queue.depth() == 5
    inbox = setup.subscribe(broker, prefetch=3)
    ack_all(broker, inbox, setup)
    assert inbox.bodies() == [*bodies(4), b"last"]


def test_the_sweep_takes_bounded_batches_in_later_turns(setup: Setup) -> None:
    """More expired than a batch: one batch per turn, until none is left, in order."""
    broker = setup.broker(limits=PAGING, policy=DeliveryPolicy(expired="dead-letter"))
    send(broker, "/queue/q", *bodies(4))
    send(broker, "/queue/q", *bodies(SWEEP_BATCH + 5, start=100), headers=expiring(setup, 1))
    settle(setup)
    queue = broker.engine.queues["/queue/q"]
    store = setup.store
    real = store.expired
    batches: list[int] = []

    def counted(*args: Any) -> Any:
        return real(*args).addCallback(lambda page: batches.append(len(page.records)) or page)

    store.expired = counted
    setup.clock.advance(2)
    settle(setup)
    assert queue.depth() == 4
    assert batches[:2] == [SWEEP_BATCH, 5]
    dead = broker.engine.queues["/queue/DLQ.q"]
    browsed = dead.browse(SWEEP_BATCH + 5)
    settle(setup)
    assert [m.body for m in result_of(browsed)] == bodies(SWEEP_BATCH + 5, start=100)


def test_messages_in_memory_are_left_to_the_memory_sweep(setup: Setup) -> None:
    """A high-priority message stored past the part's start but held in memory expires once."""
    broker = setup.broker(limits=PAGING, policy=DeliveryPolicy(expired="dead-letter"))
    send(broker, "/queue/q", *bodies(6))
    urgent = (*expiring(setup, 1), ("priority", "9"))
    send(broker, "/queue/q", b"urgent", headers=urgent)
    settle(setup)
    setup.clock.advance(2)
    settle(setup)
    assert broker.counters.expired == 1
    assert len(setup.stored_ids()["/queue/DLQ.q"]) == 1


def test_a_sweep_waits_for_a_page_in_flight() -> None:
    """One read of a part at a time: a sweep that finds a page being read tries again later."""
    clock = Clock()
    part = PagedPart(count=3, size=3, after=10)
    reads: list[Deferred[ExpiredPage]] = []
    expired: list[Message] = []

    def read(after: int, first_id: str | None, now: float, limit: int) -> Deferred[ExpiredPage]:
        reads.append(Deferred())
        return reads[-1]

    sweep = PagedExpiry(
        clock, lambda: part, read, list, expired.append, lambda: None, lambda message_id: None, 1.0
    )
    part.reading = True
    sweep.watch(0)
    clock.advance(0)
    assert reads == []
    part.reading = False
    clock.advance(1)
    assert len(reads) == 1 and part.reading
    reads[0].callback(ExpiredPage(10, (record(11), record(12)), 0.0))
    assert [m.message_id for m in expired] == ["id-11", "id-12"]
    assert (part.count, part.reading) == (1, False)


def test_a_high_priority_message_held_in_memory_is_not_read_again_from_disk(
    setup: Setup,
) -> None:
    """
    A message of a priority above the part stays in memory, though stored in
    the part's range: a page leaves it out (it was delivered twice, and the
    part's count ran out before its last message).
    """
    broker = paging_broker(setup)
    send(broker, "/queue/q", *bodies(8))
    send(broker, "/queue/q", b"urgent", headers=(*PERSISTENT, ("priority", "9")))
    send(broker, "/queue/q", *bodies(2, start=100))
    settle(setup)
    inbox = setup.subscribe(broker, prefetch=50)
    ack_all(broker, inbox, setup)
    assert inbox.bodies() == [b"urgent", *bodies(8), *bodies(2, start=100)]
    assert setup.stored_ids().get("/queue/q", []) == []


def test_a_move_takes_what_waits_behind_the_part_too(
    setup: Setup, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A move of all takes the part in its order, non-persistent (transient) messages among it."""
    transfer_batches(monkeypatch, 3)
    broker = paging_broker(setup)
    send(broker, "/queue/a", *bodies(9))
    send(broker, "/queue/a", b"transient", headers=())
    send(broker, "/queue/a", b"after")
    settle(setup)
    moving = Management(broker).queues.move("/queue/a", "/queue/b", 100)
    settle(setup, 100)
    assert result_of(moving).count == 11
    assert broker.engine.queues["/queue/a"].depth() == 0
    inbox = setup.subscribe(broker, "/queue/b", prefetch=3)
    ack_all(broker, inbox, setup)
    assert inbox.bodies() == [*bodies(9), b"transient", b"after"]


def test_paged_non_persistent_messages_that_expire_on_disk_leave_no_row(setup: Setup) -> None:
    """The sweep expires transient rows too, and forgets them: no page brings them back."""
    broker = paging_broker(setup)
    send(broker, "/queue/q", *bodies(6))
    at_ms = int((setup.clock.seconds() + 1) * 1000)
    send(broker, "/queue/q", *bodies(10, start=100), headers=(("expires", str(at_ms)),))
    send(broker, "/queue/q", b"last")
    settle(setup)
    queue = broker.engine.queues["/queue/q"]
    assert queue.depth() == 17
    assert sum(record.transient for record in stored_page(setup)) == 10
    setup.clock.advance(2)
    settle(setup)
    assert queue.depth() == 7 and broker.counters.expired == 10
    assert not any(record.transient for record in stored_page(setup))
    inbox = setup.subscribe(broker, prefetch=2)
    ack_all(broker, inbox, setup)
    assert inbox.bodies() == [*bodies(6), b"last"]


def test_a_move_of_paged_non_persistent_messages_leaves_no_row_behind(
    setup: Setup, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Moved from disk, a transient row goes with its message: the source delivers none again."""
    transfer_batches(monkeypatch, 3)
    broker = paging_broker(setup)
    send(broker, "/queue/a", *bodies(9), headers=())
    settle(setup)
    moving = Management(broker).queues.move("/queue/a", "/queue/b", 100)
    settle(setup, 100)
    assert result_of(moving).count == 9
    assert stored_page(setup, "/queue/a") == []
    source = setup.subscribe(broker, "/queue/a", prefetch=3)
    settle(setup)
    assert source.bodies() == []
    moved = setup.subscribe(broker, "/queue/b", prefetch=3)
    ack_all(broker, moved, setup)
    assert moved.bodies() == bodies(9)
