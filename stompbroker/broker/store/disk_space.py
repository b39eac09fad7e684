"""
The disk under the SQLite store: how much room is left, and the reserve that lets
removals through when there is none.

Removals must never need space that publishers could take: a queue whose ACKs
cannot be written can never be drained, so a full disk would stay full for good.
Two things keep them possible:

- the **disk alarm** (:mod:`stompbroker.broker.flow.disk_alarm`) holds persistent
  publishers while the room left (:func:`disk_space`) is under
  ``--disk-free-limit``, long before the disk is full;
- when the disk fills all the same (another process filled it), the writer
  (:mod:`stompbroker.broker.store.sqlite_writer`) writes the group again without
  its adds, and frees the **reserve** first: a file of :data:`RESERVE_BYTES` that
  the store keeps in the data directory (``reserve``) for that moment alone.  A
  removal writes a few pages to the write-ahead log and takes nothing from the
  database file (its pages go to SQLite's free list, which later adds reuse), so
  the reserve is room enough for many groups of them.  The store then refuses
  adds (:class:`~stompbroker.broker.store.base.StoreFull`) until the room left is
  back over :data:`RESUME_BYTES`, and makes the reserve again once the disk has
  the room for it.

The room left counts the disk's free space *and* the database's free pages:
acknowledged messages leave free pages, not free disk, and the next adds fill
those pages before the file grows.
"""

from __future__ import annotations

import errno
import os
import sqlite3
from pathlib import Path

from attrs import frozen

from stompbroker.logs import logger

__all__ = ["RESERVE_BYTES", "RESERVE_NAME", "RESUME_BYTES", "DiskSpace", "Reserve", "disk_space"]

log = logger("stompbroker.store")

#: The reserve file, in the data directory.
RESERVE_NAME = "reserve"
#: How much room the reserve keeps for removals.
RESERVE_BYTES = 8 << 20
#: Room left over which a store that ran out of space takes adds again.
RESUME_BYTES = 2 * RESERVE_BYTES
#: How much of the reserve is written per call: a write of 8 MiB at once would
#: hold as much in memory.
_CHUNK = 1 << 20


@frozen
class DiskSpace:
    """
    Room for the store, in bytes.

    :ivar free: what the store can still fill: the disk's space free to
        unprivileged users plus the database's free pages.
    :ivar total: the size of the data directory's filesystem.
    """

    free: int
    total: int


def disk_space(data_dir: Path, free_pages: int = 0) -> DiskSpace:
    """
    :param free_pages: bytes of free pages in the database (see :func:`free_page_bytes`).
    :returns: the room left for the store in ``data_dir``.
    :raises OSError: if the directory cannot be examined.
    """
    figures = os.statvfs(data_dir)
    return DiskSpace(
        free=figures.f_bavail * figures.f_frsize + free_pages,
        total=figures.f_blocks * figures.f_frsize,
    )


def free_page_bytes(connection: sqlite3.Connection) -> int:
    """:returns: the bytes of the database's free pages, which adds fill before it grows."""
    (pages,) = connection.execute("PRAGMA freelist_count").fetchone()
    (size,) = connection.execute("PRAGMA page_size").fetchone()
    return int(pages) * int(size)


class Reserve:
    """
    The reserve file of a data directory (see the module notes).

    Its methods touch the disk: the store calls :meth:`make` when it opens, and
    its writer thread the others.

    :param data_dir: the data directory.
    :param size: the bytes it keeps.

    :ivar held: whether the file holds its bytes now.
    """

    def __init__(self, data_dir: Path, size: int = RESERVE_BYTES) -> None:
        self.path = data_dir / RESERVE_NAME
        self.size = size
        self.held = False

    def make(self) -> bool:
        """
        Make the file (again), if the disk has room for it and more.

        :returns: whether it is held now.
        """
        if self.held:
            return True
        try:
            if os.path.getsize(self.path) >= self.size:
                self.held = True
                return True
        except OSError:
            pass
        try:
            if disk_space(self.path.parent).free < self.size * 2:
                return False
            with open(self.path, "wb") as reserve:
                zeros = bytes(_CHUNK)
                for _ in range(0, self.size, _CHUNK):
                    reserve.write(zeros)
                reserve.flush()
                os.fsync(reserve.fileno())
        except OSError as error:
            self._remove()
            if error.errno != errno.ENOSPC:
                log.warn(
                    "cannot keep the disk reserve {path}: {error}",
                    path=str(self.path),
                    error=error.strerror or str(error),
                )
            return False
        self.held = True
        return True

    def release(self) -> bool:
        """
        Give the reserve's bytes back to the disk.

        :returns: whether there was a reserve to release.
        """
        released = self.held or self.path.exists()
        self._remove()
        self.held = False
        return released

    def _remove(self) -> None:
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass
        except OSError as error:
            log.warn(
                "cannot release the disk reserve {path}: {error}",
                path=str(self.path),
                error=error.strerror or str(error),
            )
