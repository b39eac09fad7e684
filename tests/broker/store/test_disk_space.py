"""
The SQLite store on a full disk: removals still go through, adds are refused
until there is room, the reserve is given back and made again, and the log says
so once each way.

SQLite is made to refuse growing the file with ``PRAGMA max_page_count`` on the
store's own connection, which fails writes with ``SQLITE_FULL`` as a full disk
does; the room the writer sees afterwards is :func:`disk_space`, replaced where
a test needs the disk to stay full.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest
from twisted.internet import task

from stompbroker.broker.store import sqlite_writer
from stompbroker.broker.store.base import StoreFull
from stompbroker.broker.store.disk_space import (
    RESERVE_BYTES,
    RESERVE_NAME,
    DiskSpace,
    Reserve,
    disk_space,
)
from stompbroker.broker.store.sqlite import SQLiteStore
from tests.support.store import ids_by_queue, open_sqlite, result_of, sent


def fill_up(store: SQLiteStore) -> sqlite3.Connection:
    """Make SQLite refuse to grow the database, as a full disk would."""
    connection = store._connection
    assert connection is not None
    (pages,) = connection.execute("PRAGMA page_count").fetchone()
    connection.execute(f"PRAGMA max_page_count = {pages}")
    return connection


def make_room(connection: sqlite3.Connection) -> None:
    connection.execute("PRAGMA max_page_count = 1073741823")


def stay_full(monkeypatch: pytest.MonkeyPatch) -> None:
    """The writer sees no room on the disk, whatever the test's filesystem has."""
    monkeypatch.setattr(sqlite_writer, "disk_space", lambda path, pages=0: DiskSpace(0, 1 << 30))


def test_a_full_disk_refuses_the_adds_and_keeps_the_removals_of_a_group(tmp_path: Path) -> None:
    """An ACK's removal in the group a full disk refused is written all the same."""
    clock = task.Clock()
    store = open_sqlite(tmp_path, clock)
    store.add("/queue/orders", sent("m-1"))
    clock.advance(0)
    fill_up(store)
    adding = store.add("/queue/orders", sent("m-2", body=b"x" * 100_000))
    removing = store.remove("/queue/orders", "m-1")
    clock.advance(0.002)
    with pytest.raises(StoreFull, match="is full"):
        result_of(adding)
    assert result_of(removing) is None
    recovering = store.recover()
    clock.advance(0.002)
    assert ids_by_queue(result_of(recovering)) == {}


def test_the_reserve_is_given_back_when_the_disk_fills_and_made_again_with_room(
    tmp_path: Path,
) -> None:
    """The reserve file exists while the store is open, goes when the disk fills, and returns."""
    clock = task.Clock()
    store = open_sqlite(tmp_path, clock)
    reserve = tmp_path / RESERVE_NAME
    assert reserve.stat().st_size == RESERVE_BYTES
    connection = fill_up(store)
    store.add("/queue/orders", sent("m-1", body=b"x" * 100_000))
    clock.advance(0.002)
    assert not reserve.exists()
    make_room(connection)
    later = store.add("/queue/orders", sent("m-2"))
    clock.advance(0.002)
    assert result_of(later).message_id == "m-2"
    assert reserve.stat().st_size == RESERVE_BYTES


def test_adds_are_refused_until_there_is_room_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Once the disk filled, adds wait for room rather than take what removals need."""
    clock = task.Clock()
    store = open_sqlite(tmp_path, clock)
    store.add("/queue/orders", sent("m-1"))
    clock.advance(0)
    connection = fill_up(store)
    store.add("/queue/orders", sent("m-2", body=b"x" * 100_000))
    clock.advance(0.002)
    make_room(connection)
    stay_full(monkeypatch)
    refused = store.add("/queue/orders", sent("m-3"))
    marked = store.mark_delivered("/queue/orders", "m-1")
    clock.advance(0.002)
    with pytest.raises(StoreFull):
        result_of(refused)
    assert result_of(marked) is None
    monkeypatch.undo()
    taken = store.add("/queue/orders", sent("m-4"))
    clock.advance(0.002)
    assert result_of(taken).message_id == "m-4"


def test_a_full_disk_is_logged_once_when_it_fills_and_once_when_it_has_room(
    tmp_path: Path, log_events: list[dict[str, Any]]
) -> None:
    """However many writes a full disk refuses, the log gets two lines: one each way."""
    clock = task.Clock()
    store = open_sqlite(tmp_path, clock)
    connection = fill_up(store)
    for index in range(5):
        store.add("/queue/orders", sent(f"m-{index}", body=b"x" * 100_000))
        clock.advance(0.002)
    make_room(connection)
    store.add("/queue/orders", sent("m-last"))
    clock.advance(0.002)
    lines = [
        event["log_format"].split(":")[0]
        for event in log_events
        if "disk of the message store" in event.get("log_format", "")
    ]
    assert lines == [
        "the disk of the message store {path} is full",
        "the disk of the message store {path} has room again",
    ]
    (ended,) = [event for event in log_events if "refused" in event]
    assert ended["refused"] == 5


def test_disk_space_counts_the_free_pages_removals_left(tmp_path: Path) -> None:
    """Acknowledged messages leave free pages, which count as room for the next adds."""
    clock = task.Clock()
    store = open_sqlite(tmp_path, clock)
    for index in range(20):
        store.add("/queue/orders", sent(f"m-{index}", body=b"x" * 10_000))
    clock.advance(0.002)
    before = store.disk_space()
    assert before is not None
    clock.advance(0.002)
    for index in range(20):
        store.remove("/queue/orders", f"m-{index}")
    clock.advance(0.002)
    store.disk_space()
    clock.advance(0.002)
    after = store.disk_space()
    assert after is not None
    assert store._free_pages >= 20 * 10_000
    assert after.total == before.total


def test_the_reserve_is_not_made_on_a_disk_without_room_for_it(tmp_path: Path) -> None:
    """A reserve larger than half the room left is not made: it would fill the disk itself."""
    room = disk_space(tmp_path).free
    reserve = Reserve(tmp_path, size=room)
    assert not reserve.make()
    assert not (tmp_path / RESERVE_NAME).exists()
    assert not reserve.release()


def test_a_closed_store_reports_no_disk_space(tmp_path: Path) -> None:
    """The disk alarm watches nothing while the store is closed."""
    clock = task.Clock()
    store = open_sqlite(tmp_path, clock)
    result_of(store.close())
    assert store.disk_space() is None
