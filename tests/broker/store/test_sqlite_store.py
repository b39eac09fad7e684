"""
What only :class:`stompbroker.broker.store.sqlite.SQLiteStore` does: group commit,
durability across a close, and its own options.

The contract every store keeps is tested in ``test_store.py``, the data directory
in ``test_sqlite_files.py`` and the tables in ``test_sqlite_schema.py``.  Here every
test drives the writer synchronously (or one step at a time) on a ``task.Clock``;
the real writer thread, in child processes that other processes hold locks
against, stop or kill, is tested in ``tests/integration/test_store_processes.py``.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from twisted.internet import task
from twisted.internet.defer import Deferred, maybeDeferred

from stompbroker.broker.store.base import (
    DuplicateMessage,
    StoreNotOpen,
    StoreUnavailable,
    StoreWriteFailed,
)
from stompbroker.broker.store.sqlite import (
    CACHE_KIB,
    DATABASE_NAME,
    PAGE_BYTES,
    WAL_SIZE_LIMIT,
    SQLiteStore,
    wal_bytes,
)
from tests.support.store import ids_by_queue, open_sqlite, recover_from, result_of, sent


class ManualExecutor:
    """A writer that runs each piece of work only when the test says, to look between commits."""

    def __init__(self) -> None:
        self.waiting: list[tuple[Callable[[], Any], Deferred]] = []

    def __call__(self, work: Callable[[], Any]) -> Deferred:
        done: Deferred = Deferred()
        self.waiting.append((work, done))
        return done

    def run_one(self) -> None:
        """Run the oldest waiting work and fire its Deferred."""
        work, done = self.waiting.pop(0)
        maybeDeferred(work).chainDeferred(done)


def manual_store(tmp_path: Path) -> tuple[task.Clock, ManualExecutor, SQLiteStore]:
    """:returns: a clock, a manual writer and an open batch store (batch_delay 2 ms) on both."""
    clock = task.Clock()
    writer = ManualExecutor()
    store = SQLiteStore(tmp_path, reactor=clock, sync="batch", executor=writer, batch_delay=0.002)
    store.open()
    return clock, writer, store


def fired(deferreds: list[Deferred]) -> int:
    """:returns: how many of ``deferreds`` have fired."""
    return sum(deferred.called for deferred in deferreds)


# -- group commit ----------------------------------------------------------------


@pytest.mark.parametrize("sync", ["batch", "always"])
def test_adds_called_together_share_one_commit(sync: str, tmp_path: Path) -> None:
    """Adds from many clients in one reactor turn are one transaction, written at the turn's end."""
    clock = task.Clock()
    store = open_sqlite(tmp_path, clock, sync, batch_delay=0.002)
    adds = [store.add(f"/queue/q{index % 7}", sent(f"m-{index}")) for index in range(100)]
    assert (fired(adds), store.stats.commits) == (0, 0)
    clock.advance(0)
    assert (fired(adds), store.stats.commits, store.stats.operations) == (100, 1, 100)


@pytest.mark.parametrize("sync", ["batch", "always"])
def test_a_lone_producer_waits_for_nothing_but_its_commit(sync: str, tmp_path: Path) -> None:
    """
    A producer that waits for each add before the next one gets each committed at
    the end of its reactor turn, in batch mode as in always: batch gathers only
    behind a commit in flight, so it is never slower for it.
    """
    clock = task.Clock()
    writer = ManualExecutor()
    store = SQLiteStore(tmp_path, reactor=clock, sync=sync, executor=writer, batch_delay=0.002)
    store.open()
    for index in range(3):
        add = store.add("/queue/orders", sent(f"m-{index}"))
        clock.advance(0)
        assert len(writer.waiting) == 1
        writer.run_one()
        assert add.called
        assert clock.getDelayedCalls() == []
    assert (clock.seconds(), store.stats.commits) == (0, 3)


def test_max_batch_pending_operations_commit_without_waiting(tmp_path: Path) -> None:
    """In batch mode, max_batch pending operations are committed at once, the rest later."""
    clock = task.Clock()
    store = open_sqlite(tmp_path, clock, "batch", max_batch=10)
    adds = [store.add("/queue/orders", sent(f"m-{index}")) for index in range(25)]
    assert (fired(adds), store.stats.commits) == (20, 2)
    clock.advance(0.002)
    assert (fired(adds), store.stats.commits) == (25, 3)


def test_always_commits_as_soon_as_the_reactor_turn_ends(tmp_path: Path) -> None:
    """In always mode, adds made in one reactor turn share a commit that waits for nothing else."""
    clock = task.Clock()
    store = open_sqlite(tmp_path, clock, "always")
    adds = [store.add("/queue/orders", sent(f"m-{index}")) for index in range(5)]
    assert fired(adds) == 0
    clock.advance(0)
    assert (fired(adds), store.stats.commits) == (5, 1)


@pytest.mark.parametrize("sync", ["batch", "always"])
def test_operations_during_a_commit_form_the_next_group(sync: str, tmp_path: Path) -> None:
    """
    What arrives while the writer commits is committed next, as one group: at
    once in always mode; in batch mode once batch_delay has passed since the
    first of it arrived, so that more can join (here the commit in flight takes
    longer than batch_delay, so the wait is batch_delay's).
    """
    clock = task.Clock()
    writer = ManualExecutor()
    store = SQLiteStore(tmp_path, reactor=clock, sync=sync, executor=writer, batch_delay=0.002)
    store.open()
    first = [store.add("/queue/orders", sent(f"m-{index}")) for index in range(3)]
    clock.advance(0)
    assert len(writer.waiting) == 1
    clock.advance(0.0025)
    second = [store.add("/queue/orders", sent(f"n-{index}")) for index in range(4)]
    assert (len(writer.waiting), clock.getDelayedCalls()) == (1, [])
    clock.advance(0.0005)
    writer.run_one()
    assert (fired(first), fired(second)) == (3, 0)
    if sync == "batch":
        assert len(writer.waiting) == 0
        late = store.add("/queue/orders", sent("n-late"))
        clock.advance(0.001)
        assert len(writer.waiting) == 0
        clock.advance(0.001)
        second.append(late)
    assert len(writer.waiting) == 1
    writer.run_one()
    assert fired(second) == len(second)
    assert (store.stats.commits, store.stats.operations) == (2, 3 + len(second))


def test_batch_waits_no_longer_than_the_commit_before_took(tmp_path: Path) -> None:
    """
    On a fast disk batch_delay would cost more than the fsync it saves: the next
    group waits at most as long as the commit in flight took, from when its first
    operation arrived.
    """
    clock, writer, store = manual_store(tmp_path)
    store.add("/queue/orders", sent("m-0"))
    clock.advance(0)
    clock.advance(0.0002)
    gathered = store.add("/queue/orders", sent("m-1"))
    clock.advance(0.0001)
    writer.run_one()
    assert len(writer.waiting) == 0
    clock.advance(0.0001)
    assert len(writer.waiting) == 0
    clock.advance(0.00015)
    assert len(writer.waiting) == 1
    writer.run_one()
    assert gathered.called


def test_a_lazy_removal_waits_for_company_up_to_batch_delay(tmp_path: Path) -> None:
    """
    An ACK's removal starts no commit of its own before batch_delay in batch mode;
    an add that arrives meanwhile takes it along, in order, in one commit.
    """
    clock = task.Clock()
    store = open_sqlite(tmp_path, clock, "batch", batch_delay=0.002)
    store.add("/queue/orders", sent("m-1"))
    clock.advance(0)
    commits = store.stats.commits
    removed = store.remove("/queue/orders", "m-1", lazy=True)
    clock.advance(0.001)
    assert (removed.called, store.stats.commits) == (False, commits)
    added = store.add("/queue/orders", sent("m-2"))
    clock.advance(0)
    assert (removed.called, added.called, store.stats.commits) == (True, True, commits + 1)
    alone = store.remove("/queue/orders", "m-2", lazy=True)
    clock.advance(0.0015)
    assert not alone.called
    clock.advance(0.001)
    assert alone.called
    recovering = store.recover()
    clock.advance(0)
    assert ids_by_queue(result_of(recovering)) == {}


def test_a_transient_message_rides_with_the_next_commit(tmp_path: Path) -> None:
    """
    A paged non-persistent message starts no commit (no fsync) of its own before
    batch_delay: a persistent add that comes meanwhile writes it in its group,
    in call order; and its removal after a page is lazy too.
    """
    clock = task.Clock()
    store = open_sqlite(tmp_path, clock, "batch", batch_delay=0.002)
    commits = store.stats.commits
    paged_out = store.add_transient("/queue/orders", sent("t-1"))
    clock.advance(0.001)
    assert (paged_out.called, store.stats.commits) == (False, commits)
    added = store.add("/queue/orders", sent("p-2"))
    clock.advance(0)
    assert (paged_out.called, added.called, store.stats.commits) == (True, True, commits + 1)
    page = store.page("/queue/orders", 0, None, 10)
    clock.advance(0)
    (transient, persistent) = result_of(page)
    assert (transient.message_id, transient.transient) == ("t-1", True)
    assert persistent.sequence > transient.sequence
    commits = store.stats.commits
    removed = store.remove_transient("/queue/orders", transient.sequence)
    clock.advance(0.001)
    assert (removed.called, store.stats.commits) == (False, commits)
    clock.advance(0.0015)
    assert removed.called


def test_a_lazy_removal_behind_a_commit_does_not_hurry_the_next(tmp_path: Path) -> None:
    """Only lazy removals gathered behind a commit: they wait batch_delay, not the commit's time."""
    clock, writer, store = manual_store(tmp_path)
    store.add("/queue/orders", sent("m-1"))
    clock.advance(0)
    removed = store.remove("/queue/orders", "m-1", lazy=True)
    writer.run_one()
    waited = []
    for step in (0.0015, 0.001):
        clock.advance(step)
        waited.append(len(writer.waiting))
    assert waited == [0, 1]
    writer.run_one()
    assert removed.called


def test_a_lazy_removal_is_not_lazy_in_always_mode(tmp_path: Path) -> None:
    """always commits whatever is pending as soon as it can, lazy or not."""
    clock = task.Clock()
    store = open_sqlite(tmp_path, clock, "always")
    store.add("/queue/orders", sent("m-1"))
    clock.advance(0)
    removed = store.remove("/queue/orders", "m-1", lazy=True)
    clock.advance(0)
    assert removed.called


def test_batch_commits_a_full_group_without_waiting(tmp_path: Path) -> None:
    """In batch mode, max_batch operations gathered behind a commit go as soon as it ends."""
    clock = task.Clock()
    writer = ManualExecutor()
    store = SQLiteStore(tmp_path, reactor=clock, sync="batch", executor=writer, max_batch=5)
    store.open()
    store.add("/queue/orders", sent("m-0"))
    clock.advance(0)
    gathered = [store.add("/queue/orders", sent(f"n-{index}")) for index in range(5)]
    writer.run_one()
    assert (len(writer.waiting), clock.getDelayedCalls()) == (1, [])
    writer.run_one()
    assert fired(gathered) == 5


def test_recovery_sees_the_writes_called_before_it(tmp_path: Path) -> None:
    """recover() is queued behind pending writes, so it reads them."""
    clock = task.Clock()
    store = open_sqlite(tmp_path, clock)
    store.add("/queue/orders", sent("m-1"))
    store.remove("/queue/orders", "m-1")
    store.add("/queue/orders", sent("m-2"))
    recovering = store.recover()
    clock.advance(0.002)
    assert ids_by_queue(result_of(recovering)) == {"/queue/orders": ["m-2"]}


def test_off_acknowledges_before_writing(tmp_path: Path) -> None:
    """In off mode, add() fires at once with the record, and the write follows without waiting."""
    clock = task.Clock()
    store = open_sqlite(tmp_path, clock, "off")
    adding = store.add("/queue/orders", sent("m-1"))
    assert result_of(adding).message_id == "m-1"
    assert store.stats.commits == 0
    clock.advance(0)
    assert store.stats.commits == 1
    result_of(store.close())
    assert ids_by_queue(recover_from(tmp_path)) == {"/queue/orders": ["m-1"]}


def test_off_logs_a_write_that_failed_after_it_was_acknowledged(
    tmp_path: Path, log_events: list[dict[str, Any]]
) -> None:
    """In off mode nobody waits for a write, so its failure goes to the log."""
    clock = task.Clock()
    store = open_sqlite(tmp_path, clock, "off")
    store.add("/queue/orders", sent("m-1"))
    assert result_of(store.add("/queue/orders", sent("m-1"))).message_id == "m-1"
    clock.advance(0)
    (failed,) = [event for event in log_events if "log_failure" in event]
    assert failed["log_failure"].check(DuplicateMessage)
    assert failed["log_namespace"] == "stompbroker.store"


def test_failed_commit_fails_its_whole_group_and_the_store_goes_on(tmp_path: Path) -> None:
    """
    A commit SQLite refuses for want of room (here: a full database) fails every
    add of its group, and the store takes adds again once there is room.
    """
    clock = task.Clock()
    store = open_sqlite(tmp_path, clock)
    # The store's own connection, because max_page_count is per connection: it
    # makes SQLite refuse to grow the file, as a full disk would.
    connection = store._connection
    assert connection is not None
    (pages,) = connection.execute("PRAGMA page_count").fetchone()
    connection.execute(f"PRAGMA max_page_count = {pages}")
    small = store.add("/queue/orders", sent("m-1"))
    large = store.add("/queue/orders", sent("m-2", body=b"x" * 100_000))
    clock.advance(0.002)
    for adding in (small, large):
        with pytest.raises(StoreWriteFailed, match="is full"):
            result_of(adding)
    connection.execute("PRAGMA max_page_count = 1073741823")
    later = store.add("/queue/orders", sent("m-3"))
    recovering = store.recover()
    clock.advance(0.002)
    assert result_of(later).message_id == "m-3"
    assert ids_by_queue(result_of(recovering)) == {"/queue/orders": ["m-3"]}


# -- durability across close and reopen --------------------------------------------


def test_everything_survives_close_and_reopen(tmp_path: Path) -> None:
    """A new store on the same directory recovers exactly what the closed one held."""
    clock = task.Clock()
    store = open_sqlite(tmp_path, clock)
    store.add_subscription("sub-a", "/topic/a", (("selector", "x = 1"),))
    for index in range(6):
        store.add("/queue/orders", sent(f"m-{index}", expires=100.0 + index))
    store.add("sub-a", sent("t-1", "/topic/a"))
    store.remove("/queue/orders", "m-2")
    store.mark_delivered("/queue/orders", "m-3")
    store.mark_delivered("/queue/orders", "m-3")
    store.move("/queue/orders", "m-4", "/queue/DLQ.orders", sent("d-4", "/queue/DLQ.orders"))
    recovering = store.recover()
    clock.advance(0.002)
    before = result_of(recovering)
    result_of(store.close())
    assert recover_from(tmp_path) == before
    assert ids_by_queue(before) == {
        "/queue/orders": ["m-0", "m-1", "m-3", "m-5"],
        "/queue/DLQ.orders": ["d-4"],
    }


def test_sequences_continue_after_reopen(tmp_path: Path) -> None:
    """Messages added after a reopen come after those added before it."""
    clock = task.Clock()
    store = open_sqlite(tmp_path, clock)
    store.add("/queue/orders", sent("m-1"))
    result_of(store.close())
    store = open_sqlite(tmp_path, clock)
    adding = store.add("/queue/other", sent("m-2"))
    clock.advance(0.002)
    result_of(adding)
    result_of(store.close())
    assert list(recover_from(tmp_path).queues) == ["/queue/orders", "/queue/other"]


def test_close_commits_pending_operations(tmp_path: Path) -> None:
    """close() does not wait for batch_delay: it commits what is pending, then closes."""
    clock = task.Clock()
    store = open_sqlite(tmp_path, clock)
    adding = store.add("/queue/orders", sent("m-1"))
    closing = store.close()
    assert result_of(adding).message_id == "m-1"
    assert result_of(closing) is None
    assert clock.getDelayedCalls() == []
    assert ids_by_queue(recover_from(tmp_path)) == {"/queue/orders": ["m-1"]}


def test_close_waits_for_the_commit_in_flight(tmp_path: Path) -> None:
    """close() fires only after the running commit, and refuses operations meanwhile."""
    clock = task.Clock()
    writer = ManualExecutor()
    store = SQLiteStore(tmp_path, reactor=clock, executor=writer)
    store.open()
    adding = store.add("/queue/orders", sent("m-1"))
    clock.advance(0.002)
    closing = store.close()
    late = store.add("/queue/orders", sent("m-2"))
    with pytest.raises(StoreNotOpen):
        result_of(late)
    writer.run_one()
    assert (adding.called, closing.called) == (True, False)
    writer.run_one()
    assert result_of(closing) is None
    assert ids_by_queue(recover_from(tmp_path)) == {"/queue/orders": ["m-1"]}


def test_a_backup_taken_while_the_store_is_open_recovers(tmp_path: Path) -> None:
    """SQLite's online backup of the open store (docs/persistence.md) is a store of its own."""
    clock = task.Clock()
    store = open_sqlite(tmp_path / "live", clock)
    store.add_subscription("sub-a", "/topic/a")
    store.add("/queue/orders", sent("m-1"))
    recovering = store.recover()
    clock.advance(0.002)
    live = result_of(recovering)
    (tmp_path / "backup").mkdir()
    with sqlite3.connect(tmp_path / "live" / DATABASE_NAME) as source:
        with sqlite3.connect(tmp_path / "backup" / DATABASE_NAME) as target:
            source.backup(target)
    result_of(store.close())
    assert recover_from(tmp_path / "backup") == live


# -- its own options ---------------------------------------------------------------


def test_a_reactor_without_threads_needs_an_executor(tmp_path: Path) -> None:
    """
    Without threads in its reactor the writer could never report back: open() refuses, and
    touches nothing.
    """
    store = SQLiteStore(tmp_path / "data", reactor=task.Clock())
    with pytest.raises(StoreUnavailable, match="IReactorThreads"):
        store.open()
    assert not (tmp_path / "data").exists()


def test_bad_options_are_refused(tmp_path: Path) -> None:
    """An unknown sync mode or a limit below its minimum is a ValueError at construction."""
    for options in ({"sync": "sometimes"}, {"batch_delay": -1.0}, {"max_batch": 0}):
        with pytest.raises(ValueError):
            SQLiteStore(tmp_path, reactor=task.Clock(), **options)


# -- what joins an insert that has not been written ------------------------------


def wal_size(data_dir: Path) -> int:
    """:returns: the bytes in the store's write-ahead log: what its commits wrote."""
    return (data_dir / f"{DATABASE_NAME}-wal").stat().st_size


def recovered(data_dir: Path, queue: str = "/queue/orders") -> list[tuple[str, bool, int, float]]:
    """:returns: each message of ``queue`` after a reopen: its id and delivery record."""
    state = recover_from(data_dir)
    return [
        (m.message_id, m.delivered, m.redelivery_count, m.due) for m in state.queues.get(queue, ())
    ]


@pytest.mark.parametrize("marks", [1, 2, 3])
def test_delivery_marks_of_a_message_not_yet_written_join_its_insert(
    marks: int, tmp_path: Path
) -> None:
    """
    A message delivered before its group was handed to the writer is inserted
    delivered, by one row write: its consumer waits for no commit (the message
    and its marks are durable together, or neither is).
    """
    clock = task.Clock()
    store = open_sqlite(tmp_path, clock)
    adding = store.add("/queue/orders", sent("m-1"))
    marking = [store.mark_delivered("/queue/orders", "m-1") for _ in range(marks)]
    assert (fired([adding]), fired(marking)) == (0, marks)
    clock.advance(0)
    assert (fired([adding]), store.stats.commits, store.stats.operations) == (1, 1, 1)
    result_of(store.close())
    assert recovered(tmp_path) == [("m-1", True, marks - 1, 0.0)]


def test_a_removal_of_a_message_not_yet_written_means_it_is_never_written(
    tmp_path: Path,
) -> None:
    """
    An add and its removal in one group (an ``auto`` delivery, or an ACK that came
    before the group was written) write no row at all; the removal waits for nothing.
    """
    clock = task.Clock()
    store = open_sqlite(tmp_path, clock)
    store.add("/queue/orders", sent("m-0"))
    clock.advance(0)
    before = wal_size(tmp_path)
    adding = store.add("/queue/orders", sent("m-1"))
    marking = store.mark_delivered("/queue/orders", "m-1")
    removing = store.remove("/queue/orders", "m-1")
    assert (fired([adding]), fired([marking, removing])) == (0, 2)
    clock.advance(0)
    assert result_of(adding).message_id == "m-1"
    assert store.stats.commits == 2
    assert wal_size(tmp_path) == before
    result_of(store.close())
    assert recovered(tmp_path) == [("m-0", False, 0, 0.0)]


def test_a_mark_after_the_group_is_handed_to_the_writer_is_its_own_update(
    tmp_path: Path,
) -> None:
    """Once the writer has the insert, nothing changes it: the mark goes in the next group."""
    clock, writer, store = manual_store(tmp_path)
    adding = store.add("/queue/orders", sent("m-1"))
    clock.advance(0)
    marking = store.mark_delivered("/queue/orders", "m-1")
    removing_other = store.remove("/queue/orders", "m-2")
    writer.run_one()
    assert (adding.called, marking.called) == (True, False)
    clock.advance(0.002)
    writer.run_one()
    assert (marking.called, removing_other.called, store.stats.commits) == (True, True, 2)
    close = store.close()
    writer.run_one()
    result_of(close)
    assert recovered(tmp_path) == [("m-1", True, 0, 0.0)]


def test_a_mark_after_a_delay_is_applied_after_it(tmp_path: Path) -> None:
    """A NACK's due time between the insert and a mark: the mark still clears it."""
    clock = task.Clock()
    store = open_sqlite(tmp_path, clock)
    store.add("/queue/orders", sent("m-1"))
    store.mark_delivered("/queue/orders", "m-1")
    store.delay("/queue/orders", "m-1", 50.0)
    store.mark_delivered("/queue/orders", "m-1")
    clock.advance(0)
    result_of(store.close())
    assert recovered(tmp_path) == [("m-1", True, 1, 0.0)]


def test_a_dead_letter_move_of_a_message_not_yet_written_keeps_the_copy_alone(
    tmp_path: Path,
) -> None:
    """A removal after a move does not drop the insert the move deleted already."""
    clock = task.Clock()
    store = open_sqlite(tmp_path, clock)
    store.add("/queue/orders", sent("m-1"))
    store.move("/queue/orders", "m-1", "/queue/dlq", sent("dlq-1", "/queue/dlq"))
    store.remove("/queue/orders", "m-1")
    clock.advance(0)
    result_of(store.close())
    state = recover_from(tmp_path)
    assert ids_by_queue(state) == {"/queue/dlq": ["dlq-1"]}


@pytest.mark.parametrize("then", ["mark", "remove"])
def test_a_duplicate_add_fails_and_what_joined_it_applies_to_the_stored_message(
    then: str, tmp_path: Path
) -> None:
    """The key holds the id already: the add fails; the mark or removal acts on the stored one."""
    clock = task.Clock()
    store = open_sqlite(tmp_path, clock)
    store.add("/queue/orders", sent("m-1"))
    clock.advance(0)
    again = store.add("/queue/orders", sent("m-1"))
    if then == "mark":
        store.mark_delivered("/queue/orders", "m-1")
    else:
        store.remove("/queue/orders", "m-1")
    clock.advance(0)
    with pytest.raises(DuplicateMessage):
        result_of(again)
    result_of(store.close())
    expected = [("m-1", True, 0, 0.0)] if then == "mark" else []
    assert recovered(tmp_path) == expected


def test_the_log_is_checkpointed_rarely_and_the_cache_is_large(tmp_path: Path) -> None:
    """The writer's connection runs with the log size and page cache the module documents."""
    clock = task.Clock()
    store = open_sqlite(tmp_path, clock)

    def settings(connection: sqlite3.Connection) -> list[int]:
        names = ("wal_autocheckpoint", "journal_size_limit", "cache_size")
        return [connection.execute(f"PRAGMA {name}").fetchone()[0] for name in names]

    reading = store.submit(settings, write=False)
    clock.advance(0)
    filesystem = os.statvfs(tmp_path)
    log = wal_bytes(filesystem.f_blocks * filesystem.f_frsize)
    assert result_of(reading) == [log // PAGE_BYTES, log, -CACHE_KIB]


@pytest.mark.parametrize(
    ("filesystem", "log"),
    [
        (100 << 30, WAL_SIZE_LIMIT),
        (100 << 20, (100 << 20) // 16),
        (10 << 20, 1000 * PAGE_BYTES),
    ],
)
def test_the_log_is_a_sixteenth_of_a_small_filesystem_at_most(filesystem: int, log: int) -> None:
    """64 MB of log on a 100 MB disk would leave the disk alarm nothing to guard."""
    assert wal_bytes(filesystem) == log


# -- runs of inserts and deletes ---------------------------------------------------


def traced(store: SQLiteStore) -> list[str]:
    """:returns: the list the writer's statements (their first two words) are appended to."""
    statements: list[str] = []
    assert store._connection is not None
    store._connection.set_trace_callback(lambda sql: statements.append(" ".join(sql.split()[:2])))
    return statements


def test_a_group_writes_its_run_of_inserts_and_its_run_of_deletes_as_one_statement_each(
    tmp_path: Path,
) -> None:
    """
    Sixteen SENDs then sixteen ACKs, as one round of four producers and four
    consumers with four each outstanding: one INSERT for the group's messages, one
    DELETE (riding the next commit) for their removals.
    """
    clock = task.Clock()
    store = open_sqlite(tmp_path, clock)
    statements = traced(store)
    adds = [store.add("/queue/orders", sent(f"m-{n}")) for n in range(16)]
    clock.advance(0)
    assert [result_of(add).message_id for add in adds] == [f"m-{n}" for n in range(16)]
    removals = [store.remove("/queue/orders", f"m-{n}", lazy=True) for n in range(16)]
    store.add("/queue/orders", sent("m-16"))
    clock.advance(0)
    assert [result_of(removal) for removal in removals] == [None] * 16
    assert statements == [
        "BEGIN IMMEDIATE",
        "INSERT OR",
        "COMMIT",
        "BEGIN IMMEDIATE",
        "DELETE FROM",
        "INSERT OR",
        "COMMIT",
    ]
    result_of(store.close())
    assert recovered(tmp_path) == [("m-16", False, 0, 0.0)]


@pytest.mark.parametrize("count", [2, 3, 7, 64, 65, 200])
def test_runs_of_any_length_write_every_message_with_its_marks(count: int, tmp_path: Path) -> None:
    """Statements of power-of-two sizes cover a run of any length, marks kept row by row."""
    clock = task.Clock()
    store = open_sqlite(tmp_path, clock)
    for n in range(count):
        store.add("/queue/orders", sent(f"m-{n}"))
        for _ in range(n % 3):
            store.mark_delivered("/queue/orders", f"m-{n}")
    clock.advance(0)
    result_of(store.close())
    assert recovered(tmp_path) == [
        (f"m-{n}", n % 3 > 0, max(n % 3 - 1, 0), 0.0) for n in range(count)
    ]


def test_a_duplicate_in_a_run_of_inserts_fails_alone_and_its_marks_apply_to_the_stored_one(
    tmp_path: Path,
) -> None:
    """The rest of the run is written; the duplicate is answered as one add on its own is."""
    clock = task.Clock()
    store = open_sqlite(tmp_path, clock)
    store.add("/queue/orders", sent("m-1"))
    clock.advance(0)
    before = store.add("/queue/orders", sent("m-0"))
    again = store.add("/queue/orders", sent("m-1"))
    store.mark_delivered("/queue/orders", "m-1")
    after = store.add("/queue/orders", sent("m-2"))
    twice = store.add("/queue/orders", sent("m-2"))
    clock.advance(0)
    assert (result_of(before).message_id, result_of(after).message_id) == ("m-0", "m-2")
    for duplicate in (again, twice):
        with pytest.raises(DuplicateMessage):
            result_of(duplicate)
    result_of(store.close())
    assert recovered(tmp_path) == [
        ("m-1", True, 0, 0.0),
        ("m-0", False, 0, 0.0),
        ("m-2", False, 0, 0.0),
    ]


def test_a_run_of_inserts_with_a_dropped_one_writes_the_others_in_order(tmp_path: Path) -> None:
    """A message acknowledged before its group was written is left out of its run."""
    clock = task.Clock()
    store = open_sqlite(tmp_path, clock)
    for n in range(5):
        store.add("/queue/orders", sent(f"m-{n}"))
    store.remove("/queue/orders", "m-2")
    clock.advance(0)
    result_of(store.close())
    assert [m for m, *_ in recovered(tmp_path)] == ["m-0", "m-1", "m-3", "m-4"]


def test_a_run_of_removals_of_several_keys_deletes_each_from_its_own(tmp_path: Path) -> None:
    """Removals are joined per key: an id removed from one queue stays in another."""
    clock = task.Clock()
    store = open_sqlite(tmp_path, clock)
    for queue in ("/queue/a", "/queue/b"):
        for n in range(3):
            store.add(queue, sent(f"m-{n}", queue))
    clock.advance(0)
    for queue, n in (("/queue/a", 0), ("/queue/a", 1), ("/queue/b", 2), ("/queue/a", 2)):
        store.remove(queue, f"m-{n}")
    clock.advance(0)
    result_of(store.close())
    assert ids_by_queue(recover_from(tmp_path)) == {"/queue/b": ["m-0", "m-1"]}
