"""
The data directory of :class:`~stompbroker.broker.store.sqlite.SQLiteStore`
(:mod:`stompbroker.broker.store.sqlite_files`): its lock, and refusing a damaged,
busy or unwritable directory with an error that says what to do.

The store runs its writer synchronously here; the tests that need a second
process, or one without root's power over permissions, use
:mod:`tests.broker.sqlite_children`.
"""

from __future__ import annotations

import ctypes
import os
import subprocess
from pathlib import Path

import pytest
from twisted.internet import task

from stompbroker.broker.store.base import StoreDamaged, StoreLocked, StoreUnavailable
from stompbroker.broker.store.sqlite import DATABASE_NAME, SQLiteStore
from tests.broker.sqlite_children import CHILD_TIMEOUT, child_command, run_child
from tests.broker.test_store import open_sqlite, result_of, run_now, sent
from tests.integration.broker_process import ROOT, subprocess_env


def test_a_garbage_file_is_damaged(tmp_path: Path) -> None:
    """A database file that is not SQLite stops open() with StoreDamaged, and releases the lock."""
    (tmp_path / DATABASE_NAME).write_bytes(b"this is not a database\n" * 200)
    store = SQLiteStore(tmp_path, reactor=task.Clock(), executor=run_now)
    with pytest.raises(StoreDamaged, match="restore it from a backup, or move it away"):
        store.open()
    assert (tmp_path / DATABASE_NAME).read_bytes().startswith(b"this is not")
    (tmp_path / DATABASE_NAME).unlink()
    open_sqlite(tmp_path, task.Clock())


def test_a_damaged_page_fails_recovery_rather_than_recovering_less(tmp_path: Path) -> None:
    """A store whose message pages are overwritten fails recover() with StoreDamaged."""
    clock = task.Clock()
    store = open_sqlite(tmp_path, clock)
    for index in range(200):
        store.add("/queue/orders", sent(f"m-{index}", body=b"x" * 500))
    result_of(store.close())
    with open(tmp_path / DATABASE_NAME, "r+b") as database:
        database.seek(3 * 4096)
        database.write(b"\xff" * 8192)
    store = open_sqlite(tmp_path, clock)
    recovering = store.recover()
    clock.advance(0.002)
    with pytest.raises(StoreDamaged, match="restore it from a backup"):
        result_of(recovering)
    result_of(store.close())


def test_a_file_in_place_of_the_directory_is_unavailable(tmp_path: Path) -> None:
    """A data directory path that names a file stops open() with StoreUnavailable."""
    (tmp_path / "data").write_text("")
    store = SQLiteStore(tmp_path / "data", reactor=task.Clock(), executor=run_now)
    with pytest.raises(StoreUnavailable, match="choose another"):
        store.open()


def drop_file_permission_override() -> None:
    """
    In a child about to exec, drop root's power to write where permissions forbid.

    Removing ``CAP_DAC_OVERRIDE`` (and its relatives) from the bounding set means
    the program exec'd next does not get them, so a read-only directory is
    read-only even to root.
    """
    libc = ctypes.CDLL(None, use_errno=True)
    pr_capbset_drop = 24
    for capability in (1, 2, 3):  # CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH, CAP_FOWNER
        if libc.prctl(pr_capbset_drop, capability, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP) failed")


def test_a_read_only_data_directory_is_unavailable(tmp_path: Path) -> None:
    """A data directory the broker may not write stops open() with StoreUnavailable."""
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    data_dir.chmod(0o555)
    try:
        if os.geteuid() != 0:
            with pytest.raises(StoreUnavailable, match="the broker's user can write"):
                SQLiteStore(data_dir, reactor=task.Clock(), executor=run_now).open()
        else:
            child = run_child("open", str(data_dir), preexec_fn=drop_file_permission_override)
            assert child.stdout.startswith("StoreUnavailable:"), child.stdout + child.stderr
            assert "the broker's user can write" in child.stdout
    finally:
        data_dir.chmod(0o755)


def test_a_second_store_on_one_directory_is_locked(tmp_path: Path) -> None:
    """Two stores, even in one process, never share a data directory; close() frees it."""
    first = open_sqlite(tmp_path, task.Clock())
    with pytest.raises(StoreLocked, match=f"process {os.getpid()}"):
        SQLiteStore(tmp_path, reactor=task.Clock(), executor=run_now).open()
    result_of(first.close())
    result_of(open_sqlite(tmp_path, task.Clock()).close())


def test_another_process_holding_the_directory_locks_it_until_it_dies(tmp_path: Path) -> None:
    """A directory open in another process is refused, and free once that process is killed."""
    holder = subprocess.Popen(
        child_command("hold", str(tmp_path)),
        cwd=ROOT,
        env=subprocess_env(),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline() == "held\n"
        in_use = f"in use by another broker \\(process {holder.pid}\\)"
        with pytest.raises(StoreLocked, match=in_use):
            SQLiteStore(tmp_path, reactor=task.Clock(), executor=run_now).open()
    finally:
        holder.kill()
        holder.wait(CHILD_TIMEOUT)
    result_of(open_sqlite(tmp_path, task.Clock()).close())
