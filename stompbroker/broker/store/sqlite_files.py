"""
The files of the SQLite store: the data directory's layout and lock, and what the
operator is told when the directory or the database in it cannot be used.

The data directory holds ``messages.sqlite3`` (with SQLite's ``-wal`` and
``-shm`` files) and ``lock``, which the store holds with ``flock`` for as long
as it is open, so two brokers can never share a directory; the lock file names
the process holding it.  Every error here is a
:class:`~stompbroker.broker.store.base.StoreError` whose message says what to do:
stop the other broker, restore a backup, free the disk, choose another directory.
"""

from __future__ import annotations

import errno
import fcntl
import os
import sqlite3
from pathlib import Path

from stompbroker.broker.store.base import (
    StoreDamaged,
    StoreError,
    StoreFull,
    StoreLocked,
    StoreUnavailable,
    StoreWriteFailed,
)

__all__ = [
    "DATABASE_NAME",
    "LOCK_NAME",
    "lock_data_dir",
    "store_damaged",
    "store_full",
    "store_unavailable",
    "translate_error",
]

DATABASE_NAME = "messages.sqlite3"
LOCK_NAME = "lock"


def lock_data_dir(data_dir: Path) -> int:
    """
    Make the data directory if need be and take its lock.

    :returns: the lock file's descriptor; closing it releases the lock.
    :raises StoreLocked: another process (or store) holds the directory.
    :raises StoreUnavailable: the directory cannot be made or locked.
    """
    lock_path = data_dir / LOCK_NAME
    try:
        data_dir.mkdir(parents=True, exist_ok=True)
        descriptor = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as error:
        raise store_unavailable(data_dir, error.strerror or str(error)) from error
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as error:
        holder = os.pread(descriptor, 32, 0).decode("ascii", "replace").strip()
        os.close(descriptor)
        if error.errno not in (errno.EWOULDBLOCK, errno.EAGAIN):
            raise store_unavailable(data_dir, error.strerror or str(error)) from error
        raise StoreLocked(
            f"the data directory {data_dir} is in use by another broker"
            f" (process {holder or 'unknown'}); stop that broker, or give this one"
            " another data directory (--data-dir)"
        ) from error
    os.ftruncate(descriptor, 0)
    os.pwrite(descriptor, f"{os.getpid()}\n".encode(), 0)
    return descriptor


def translate_error(error: sqlite3.Error, fallback: type[StoreError], data_dir: Path) -> StoreError:
    """
    Name an SQLite error by what the operator must do about it.

    :param fallback: the kind for errors that say nothing more specific.
    :param data_dir: the data directory of the database that failed.
    """
    path = data_dir / DATABASE_NAME
    name = getattr(error, "sqlite_errorname", "")
    if name.startswith(("SQLITE_NOTADB", "SQLITE_CORRUPT")):
        return store_damaged(path, str(error))
    if name.startswith(("SQLITE_BUSY", "SQLITE_LOCKED")):
        return StoreLocked(f"{path} is locked by another program ({error}); stop it and try again")
    if name.startswith(("SQLITE_READONLY", "SQLITE_CANTOPEN", "SQLITE_PERM", "SQLITE_AUTH")):
        return store_unavailable(data_dir, str(error))
    if name.startswith("SQLITE_FULL"):
        return store_full(data_dir)
    if fallback is StoreWriteFailed:
        return StoreWriteFailed(
            f"cannot write to the message store {path}: {error}; nothing of this"
            " group is stored (is the disk full?)"
        )
    return store_unavailable(data_dir, str(error))


def store_full(data_dir: Path) -> StoreFull:
    """
    :param data_dir: the data directory.
    :returns: the error for a write refused because the disk is full.
    """
    return StoreFull(
        f"the disk of the message store {data_dir} is full; nothing that needs more"
        " space is stored until there is room again (free some, or drain queues)"
    )


def store_damaged(path: Path, reason: str) -> StoreDamaged:
    """
    :param path: the database file.
    :param reason: what SQLite, or the schema check, found.
    :returns: the error for a database that is not a readable stompbroker store.
    """
    return StoreDamaged(
        f"{path} is not a readable stompbroker store ({reason}); restore it from"
        " a backup, or move it away to start with an empty store"
    )


def store_unavailable(data_dir: Path, reason: str) -> StoreUnavailable:
    """
    :param data_dir: the data directory.
    :param reason: why it cannot be used.
    :returns: the error for a data directory the store cannot make, lock or write.
    """
    return StoreUnavailable(
        f"cannot use {data_dir} as the data directory: {reason}; make it a"
        " directory the broker's user can write, or choose another (--data-dir)"
    )
