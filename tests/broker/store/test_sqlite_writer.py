"""
Tests of :class:`GroupCommit` on its own, without a store: a database connection,
a writer that runs in the caller's thread and a ``task.Clock``.  What the store
makes of it (the ``sync`` modes, ``batch_delay``, ``max_batch``) is tested through
the store in ``test_sqlite_store.py``.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest
from twisted.internet import task

from stompbroker.broker.store.base import DuplicateMessage
from stompbroker.broker.store.sqlite_writer import GroupCommit, StoreStats
from tests.support.store import result_of, run_now


def writer(path: Path) -> tuple[task.Clock, sqlite3.Connection, StoreStats, GroupCommit]:
    """:returns: a clock, a database with one table ``t``, the writer's counts, and the writer."""
    clock = task.Clock()
    connection = sqlite3.connect(path / "w.sqlite3", isolation_level=None)
    connection.execute("CREATE TABLE t (v INTEGER PRIMARY KEY)")
    stats = StoreStats()
    return clock, connection, stats, GroupCommit(connection, run_now, clock, 0.0, 100, stats, path)


def insert(value: int) -> Callable[[sqlite3.Connection], int]:
    """:returns: an operation that inserts ``value`` and answers it."""

    def apply(connection: sqlite3.Connection) -> int:
        connection.execute("INSERT INTO t VALUES (?)", (value,))
        return value

    return apply


def refuse(connection: sqlite3.Connection) -> None:
    raise DuplicateMessage("refused")


def test_what_one_reactor_turn_submits_is_committed_as_one_group_at_its_end(tmp_path: Path) -> None:
    clock, connection, stats, group = writer(tmp_path)
    done = [group.submit(insert(value)) for value in range(3)]
    assert not any(deferred.called for deferred in done)
    clock.advance(0)
    assert [result_of(deferred) for deferred in done] == [0, 1, 2]
    assert (stats.commits, stats.operations) == (1, 3)
    assert connection.execute("SELECT count(*) FROM t").fetchone() == (3,)


def test_an_operation_refused_by_the_store_fails_alone(tmp_path: Path) -> None:
    clock, connection, stats, group = writer(tmp_path)
    kept, refused = group.submit(insert(1)), group.submit(refuse)
    clock.advance(0)
    assert result_of(kept) == 1
    with pytest.raises(DuplicateMessage):
        result_of(refused)
    assert connection.execute("SELECT v FROM t").fetchall() == [(1,)]


def test_close_commits_what_is_pending_then_closes_the_connection(tmp_path: Path) -> None:
    _, connection, stats, group = writer(tmp_path)
    pending = group.submit(insert(7))
    closed = group.close()
    assert (result_of(pending), result_of(closed), stats.commits) == (7, None, 1)
    with pytest.raises(sqlite3.ProgrammingError):
        connection.execute("SELECT 1")


def test_a_committed_group_is_settled_inside_settle_together(tmp_path: Path) -> None:
    """
    Every Deferred of a group fires within one call of ``settle_together`` (the
    transports' write coalescer, in twistd), and what is sealed is sealed before
    the writer runs it.
    """
    clock = task.Clock()
    connection = sqlite3.connect(tmp_path / "w.sqlite3", isolation_level=None)
    connection.execute("CREATE TABLE t (v INTEGER PRIMARY KEY)")
    seen: list[str] = []

    def together(settle: Callable[[object], object], outcome: object) -> None:
        seen.append("settling")
        settle(outcome)
        seen.append("settled")

    group = GroupCommit(
        connection,
        run_now,
        clock,
        0.0,
        100,
        StoreStats(),
        tmp_path,
        sealed=lambda: seen.append("sealed"),
        settle_together=together,
    )
    for value in range(3):
        group.submit(insert(value)).addCallback(lambda value: seen.append(f"fired {value}"))
    clock.advance(0)
    assert seen == ["sealed", "settling", "fired 0", "fired 1", "fired 2", "settled"]


class Counted:
    """
    An operation of a kind that the writer may write in runs: each run is
    recorded, and a run refuses (writes nothing of) a multiple of five.
    """

    runs: list[list[int]] = []

    def __init__(self, value: int) -> None:
        self.value = value

    def __call__(self, connection: sqlite3.Connection) -> int:
        Counted.runs.append([self.value])
        connection.execute("INSERT INTO t VALUES (?)", (self.value,))
        return self.value

    @staticmethod
    def write_run(
        connection: sqlite3.Connection, operations: list[Counted]
    ) -> list[tuple[bool, object]]:
        values = [operation.value for operation in operations]
        Counted.runs.append(values)
        kept = [(value,) for value in values if value % 5]
        connection.executemany("INSERT INTO t VALUES (?)", kept)
        return [
            (True, value) if value % 5 else (False, DuplicateMessage("five")) for value in values
        ]


def test_neighbours_of_one_kind_are_written_as_a_run_in_call_order(tmp_path: Path) -> None:
    """
    Consecutive operations whose ``write_run`` is the same go to it together; an
    operation of another kind ends the run, and a run of one is called alone.
    Each keeps its own outcome, a failure of its own included.
    """
    clock, connection, stats, group = writer(tmp_path)
    Counted.runs = []
    done = [group.submit(Counted(value)) for value in (1, 2, 3)]
    done.append(group.submit(insert(4)))
    done.append(group.submit(Counted(5)))
    done.append(group.submit(insert(7)))
    done += [group.submit(Counted(value)) for value in (6, 10, 11)]
    clock.advance(0)
    assert Counted.runs == [[1, 2, 3], [5], [6, 10, 11]]
    outcomes: list[object] = []
    for deferred in done:
        deferred.addErrback(lambda failure: type(failure.value).__name__).addCallback(
            outcomes.append
        )
    assert outcomes == [1, 2, 3, 4, 5, 7, 6, "DuplicateMessage", 11]
    assert (stats.commits, stats.operations) == (1, 9)
    assert connection.execute("SELECT count(*) FROM t").fetchone() == (8,)
