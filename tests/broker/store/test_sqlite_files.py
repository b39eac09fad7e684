"""
The data directory of :class:`~stompbroker.broker.store.sqlite.SQLiteStore`
(:mod:`stompbroker.broker.store.sqlite_files`): its lock, and refusing a damaged,
busy or unwritable directory with an error that says what to do.

The store runs its writer synchronously here; the tests that need a second
process, or one without root's power over permissions, are in
``tests/integration/test_store_processes.py``.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from twisted.internet import task

from stompbroker.broker.store.base import StoreDamaged, StoreLocked, StoreUnavailable
from stompbroker.broker.store.sqlite import DATABASE_NAME
from tests.support.store import (
    FILLING,
    GARBAGE,
    damage_pages,
    open_sqlite,
    result_of,
    sent,
    sqlite_store,
    write_garbage,
)


def test_a_garbage_file_is_damaged(tmp_path: Path) -> None:
    """A database file that is not SQLite stops open() with StoreDamaged, and releases the lock."""
    write_garbage(tmp_path)
    store = sqlite_store(tmp_path)
    with pytest.raises(StoreDamaged, match="restore it from a backup, or move it away"):
        store.open()
    assert (tmp_path / DATABASE_NAME).read_bytes() == GARBAGE
    (tmp_path / DATABASE_NAME).unlink()
    open_sqlite(tmp_path, task.Clock())


def test_a_damaged_page_fails_recovery_rather_than_recovering_less(tmp_path: Path) -> None:
    """A store whose message pages are overwritten fails recover() with StoreDamaged."""
    clock = task.Clock()
    store = open_sqlite(tmp_path, clock)
    count, size = FILLING
    for index in range(count):
        store.add("/queue/orders", sent(f"m-{index}", body=b"x" * size))
    result_of(store.close())
    damage_pages(tmp_path)
    store = open_sqlite(tmp_path, clock)
    recovering = store.recover()
    clock.advance(0.002)
    with pytest.raises(StoreDamaged, match="restore it from a backup"):
        result_of(recovering)
    result_of(store.close())


def test_a_file_in_place_of_the_directory_is_unavailable(tmp_path: Path) -> None:
    """A data directory path that names a file stops open() with StoreUnavailable."""
    (tmp_path / "data").write_text("")
    store = sqlite_store(tmp_path / "data")
    with pytest.raises(StoreUnavailable, match="choose another"):
        store.open()


def test_a_second_store_on_one_directory_is_locked(tmp_path: Path) -> None:
    """Two stores, even in one process, never share a data directory; close() frees it."""
    first = open_sqlite(tmp_path, task.Clock())
    with pytest.raises(StoreLocked, match=f"process {os.getpid()}"):
        sqlite_store(tmp_path).open()
    result_of(first.close())
    result_of(open_sqlite(tmp_path, task.Clock()).close())
