"""
The durable message store: SQLite in WAL mode, written by one thread, with group commit.

Every operation is queued in the reactor thread and written, in call order, by
one writer thread that commits each group of pending operations in one
transaction, with one fsync: :mod:`~stompbroker.broker.store.sqlite_writer`
(an object the open :class:`SQLiteStore` holds) says how.  The reactor thread never touches
the disk after :meth:`SQLiteStore.open`.

``sync`` chooses the trade-off:

``always``
    ``PRAGMA synchronous=FULL``.  Whatever is pending is written as soon as the
    writer is free: at the end of the current reactor turn when it is idle,
    right after the commit in flight otherwise.  A lone message waits for one
    commit and one fsync.  Acknowledged means on disk: it survives the broker
    being killed and the machine losing power.
``batch`` (the default)
    The same promise as ``always``, and the same when the writer is idle: a
    lone producer never waits longer than with ``always``.  What arrives while
    a commit is in flight gathers for the next group, which then waits until
    ``batch_delay`` (2 ms) has passed since the first of it arrived, or until
    ``max_batch`` operations are pending: under load, fewer and fuller commits
    (fewer fsyncs per message), for at most that much more latency.  It never
    waits longer than the commit before it took (from the reactor's view,
    thread hand-offs included): on a disk whose fsync takes 50 us, waiting 2 ms
    to save one costs forty times what it saves, and a producer that waits for
    each receipt would pay it on every message.
``off``
    ``PRAGMA synchronous=OFF``.  Operations are acknowledged when they are
    called, before they are written; the writer commits them as soon as it can
    without fsync.  A broker crash loses what was acknowledged but not yet
    committed (at most a group or so); an operating-system crash or power loss
    can lose more, or damage the database.

A delivery mark or a removal of a message whose add still waits for its group
joins the add (:class:`~stompbroker.broker.store.sqlite_records.PendingInsert`)
and answers at once: the add writes the message marked, or not at all.

The data directory holds ``messages.sqlite3`` (with SQLite's ``-wal`` and
``-shm`` files), ``reserve``, room kept for removals on a full disk
(:mod:`~stompbroker.broker.store.disk_space`), and ``lock``, which the store
holds with ``flock`` for as long as it is open, so two brokers can never share
a directory
(:mod:`~stompbroker.broker.store.sqlite_files`).  The tables are
:mod:`~stompbroker.broker.store.sqlite_schema`; what the writer runs for each
operation, and the read at recovery, :mod:`~stompbroker.broker.store.sqlite_records`.
"""

from __future__ import annotations

import functools
import os
import sqlite3
from pathlib import Path
from typing import Any

from twisted.internet.defer import Deferred, fail, succeed
from twisted.internet.interfaces import IReactorThreads
from twisted.internet.threads import deferToThreadPool
from twisted.python.failure import Failure
from twisted.python.threadpool import ThreadPool
from zope.interface import implementer

from stompbroker.broker.store import sqlite_records
from stompbroker.broker.store.base import (
    ExpiredPage,
    IMessageStore,
    MessageFields,
    RecoveredState,
    ScheduledRecord,
    StoredMessage,
    StoreNotOpen,
    StoreUnavailable,
    stored_message,
)
from stompbroker.broker.store.disk_space import DiskSpace, Reserve, disk_space, free_page_bytes
from stompbroker.broker.store.sqlite_files import (
    DATABASE_NAME,
    lock_data_dir,
    store_unavailable,
    translate_error,
)
from stompbroker.broker.store.sqlite_schema import prepare_schema
from stompbroker.broker.store.sqlite_writer import (
    Apply,
    Executor,
    GroupCommit,
    StoreStats,
    Together,
    alone,
)
from stompbroker.logs import logger
from stompbroker.protocol.frames import Headers

__all__ = ["DATABASE_NAME", "SYNC_MODES", "SQLiteStore", "StoreStats"]

log = logger("stompbroker.store")


#: How ``sync`` may be set; see the module docstring.
SYNC_MODES: tuple[str, ...] = ("always", "batch", "off")

#: Pages the write-ahead log may hold before a commit copies them into the
#: database (``wal_autocheckpoint``; SQLite's default is 1 000).  A message's
#: pages are written to the log by its insert and again by its delete; a
#: checkpoint copies each page once, however often the log holds it.  With 4 MB
#: of log, a checkpoint came after every few commits and copied every body into
#: the database, for a message its consumer had already acknowledged; with 64 MB,
#: the pages of a flowing queue are freed and reused many times in between, and
#: each commit takes half the time with 64 KiB bodies, a quarter less with 1 KiB.
#: The log is truncated back to the same size after a checkpoint that leaves it
#: larger (``journal_size_limit``): the disk it keeps is what removals write into.
WAL_SIZE_LIMIT = 64 * 1024 * 1024
#: On a small filesystem the log takes at most this share of it: 64 MB of a
#: 100 MB disk would leave the disk alarm nothing to guard.
WAL_SHARE_OF_DISK = 1 / 16
#: SQLite's page, which ``wal_autocheckpoint`` counts in.
PAGE_BYTES = 4096


def wal_bytes(filesystem_bytes: int) -> int:
    """
    :param filesystem_bytes: the size of the data directory's filesystem.
    :returns: how large the write-ahead log may grow between checkpoints:
        :data:`WAL_SIZE_LIMIT`, or :data:`WAL_SHARE_OF_DISK` of a smaller
        filesystem, but never under SQLite's own default of 1 000 pages.
    """
    share = int(filesystem_bytes * WAL_SHARE_OF_DISK)
    return max(1000 * PAGE_BYTES, min(WAL_SIZE_LIMIT, share))


#: The writer's page cache, in KiB (``cache_size``; SQLite's default is 2 MiB).
#: A removal reads the chain of a large body's pages to free them, and an insert
#: finds free pages through the free list: kept in memory, not read back.
CACHE_KIB = 32768


@implementer(IMessageStore)
class SQLiteStore:
    """
    Persistent messages in ``data_dir/messages.sqlite3``.

    :param data_dir: the data directory; made if missing.
    :param reactor: provides ``callLater``; with the default executor also
        ``callFromThread`` and ``addSystemEventTrigger``: the store closes itself
        before the reactor shuts down.
    :param sync: ``always``, ``batch`` or ``off``; see the module docstring.
    :param batch_delay: in ``batch`` mode, the longest an operation that arrived
        during a commit waits for others to share the next one, in seconds (and
        never longer than that commit took).
    :param max_batch: most operations in one transaction; in ``batch`` mode,
        this many pending operations are committed without waiting.
    :param executor: runs the writer's work and returns a Deferred of its result;
        by default one thread of a private ``ThreadPool``.  Tests pass a
        synchronous one.
    :param close_at_shutdown: with the default executor, close the store before
        the reactor shuts down, in case nobody else does.  twistd's broker closes
        it itself, after its clients have been shut down, and turns this off.
    :param settle_together: runs the firing of each committed group's
        Deferreds; twistd passes the transports' write coalescer (see
        :class:`~stompbroker.broker.store.sqlite_writer.GroupCommit`).
    :raises ValueError: for an unknown ``sync`` or a limit below its minimum.
    """

    def __init__(
        self,
        data_dir: str | os.PathLike[str],
        *,
        reactor: Any,
        sync: str = "batch",
        batch_delay: float = 0.002,
        max_batch: int = 1000,
        executor: Executor | None = None,
        close_at_shutdown: bool = True,
        settle_together: Together = alone,
    ) -> None:
        if sync not in SYNC_MODES:
            raise ValueError(f"sync must be one of {', '.join(SYNC_MODES)}, not {sync!r}")
        if batch_delay < 0:
            raise ValueError(f"batch_delay must be >= 0, not {batch_delay}")
        if max_batch < 1:
            raise ValueError(f"max_batch must be >= 1, not {max_batch}")
        self.data_dir = Path(data_dir)
        self.path = self.data_dir / DATABASE_NAME
        self.sync = sync
        self.stats = StoreStats()
        self._reactor = reactor
        self._delay = batch_delay if sync == "batch" else 0.0
        self._max_batch = max_batch
        self._executor = executor
        self._pool: ThreadPool | None = None
        self._shutdown_trigger: Any = None
        self.close_at_shutdown = close_at_shutdown
        self._settle_together = settle_together
        self._lock_fd: int | None = None
        self._connection: sqlite3.Connection | None = None
        self._state = "new"
        self._next_sequence = 1
        #: Commits the writes while the store is open.
        self._writer: GroupCommit | None = None
        #: The inserts of the group that is gathering, by key and message-id:
        #: what a delivery mark or a removal of that message joins.
        self._unwritten: dict[tuple[str, str], sqlite_records.PendingInsert] = {}
        self._closed: list[Deferred[None]] = []
        self._reserve = Reserve(self.data_dir)
        #: The database's free pages in bytes, as last read (see :meth:`disk_space`).
        self._free_pages = 0
        self._reading_free_pages = False

    # -- life cycle ----------------------------------------------------------

    def open(self) -> None:
        """
        Lock the data directory, open the database and check that it is ours.

        Blocks on disk, once, at start-up: a broker must not start on a store it
        cannot use.  A no-op if the store is open already.

        :raises StoreLocked: another process (or store) holds the directory.
        :raises StoreDamaged: the database file is not a stompbroker store.
        :raises StoreIncompatible: a newer stompbroker wrote it.
        :raises StoreUnavailable: the directory cannot be made, locked or written.
        :raises StoreNotOpen: the store was closed; make a new one.
        """
        if self._state == "open":
            return
        if self._state != "new":
            raise StoreNotOpen("this message store has been closed; make a new one")
        if self._executor is None and not IReactorThreads.providedBy(self._reactor):
            raise store_unavailable(
                self.data_dir,
                f"the reactor {self._reactor!r} cannot run the store's writer thread"
                " (it does not provide IReactorThreads); pass an executor",
            )
        self._lock_fd = lock_data_dir(self.data_dir)
        try:
            self._connection = self._connect()
        except BaseException:
            os.close(self._lock_fd)
            self._lock_fd = None
            raise
        if not self._reserve.make():
            log.warn(
                "no room on the disk of {path} for the reserve that keeps acknowledgements"
                " possible when it fills up",
                path=str(self.data_dir),
            )
        executor = self._executor
        if executor is None:
            self._pool = ThreadPool(minthreads=1, maxthreads=1, name="stompbroker-store")
            self._pool.start()
            pool = self._pool
            executor = self._executor = lambda work: deferToThreadPool(self._reactor, pool, work)
            # The writer thread would keep the process alive after the reactor
            # stops, and what is pending must be committed: close at shutdown,
            # which waits for the Deferred, unless closed before.
            if self.close_at_shutdown:
                self._shutdown_trigger = self._reactor.addSystemEventTrigger(
                    "before", "shutdown", self._close_at_shutdown
                )
        self._writer = GroupCommit(
            self._connection,
            executor,
            self._reactor,
            self._delay,
            self._max_batch,
            self.stats,
            self.data_dir,
            self._reserve,
            self._unwritten.clear,
            self._settle_together,
        )
        self._state = "open"
        log.info("message store {path} open, sync {sync}", path=str(self.path), sync=self.sync)

    def close(self) -> Deferred[None]:
        """
        Commit what is pending, close the database and release the directory.

        :returns: a Deferred that fires when all that is done.
        """
        if self._state in ("new", "closed"):
            self._state = "closed"
            return succeed(None)
        done: Deferred[None] = Deferred()
        self._closed.append(done)
        if self._state == "open":
            self._state = "closing"
            assert self._writer is not None
            self._writer.close().addBoth(self._released)
        return done

    def _close_at_shutdown(self) -> Deferred[None]:
        """The reactor is stopping: close, and let shutdown wait until that is done."""
        self._shutdown_trigger = None
        return self.close()

    def _connect(self) -> sqlite3.Connection:
        """
        Open the database, set it up for this ``sync`` mode and check its schema.

        :returns: a connection for the writer thread.
        """
        try:
            connection = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        except sqlite3.Error as error:
            raise translate_error(error, StoreUnavailable, self.data_dir) from error
        try:
            self._prepare(connection)
        except BaseException:
            connection.close()
            raise
        return connection

    def _prepare(self, connection: sqlite3.Connection) -> None:
        """
        Switch to WAL, size its log and the page cache, create or check the
        schema, and find the next sequence.

        :raises StoreError: as :meth:`open` documents.
        """
        try:
            connection.execute("PRAGMA busy_timeout = 5000")
            (mode,) = connection.execute("PRAGMA journal_mode = WAL").fetchone()
            if mode != "wal":
                raise store_unavailable(
                    self.data_dir,
                    f"SQLite cannot use write-ahead logging there (journal mode {mode})",
                )
            synchronous = "OFF" if self.sync == "off" else "FULL"
            connection.execute(f"PRAGMA synchronous = {synchronous}")
            # Some builds (Debian's) zero every freed page, which writes each
            # removed message to the write-ahead log once more: an ACK would then
            # need as much new room as the SEND did, and a full disk could never
            # be drained.  FAST zeroes only what is written anyway.
            connection.execute("PRAGMA secure_delete = FAST")
            log_bytes = wal_bytes(_filesystem_bytes(self.data_dir))
            connection.execute(f"PRAGMA wal_autocheckpoint = {log_bytes // PAGE_BYTES}")
            connection.execute(f"PRAGMA journal_size_limit = {log_bytes}")
            connection.execute(f"PRAGMA cache_size = -{CACHE_KIB}")
            prepare_schema(connection, self.path)
            self._next_sequence = sqlite_records.next_sequence(connection)
        except sqlite3.Error as error:
            raise translate_error(error, StoreUnavailable, self.data_dir) from error

    def _released(self, result: Any) -> None:
        """Stop the writer thread, release the lock and tell whoever waits on :meth:`close`."""
        if self._pool is not None:
            self._pool.stop()
            self._pool = None
        if self._shutdown_trigger is not None:
            self._reactor.removeSystemEventTrigger(self._shutdown_trigger)
            self._shutdown_trigger = None
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None
        self._connection = None
        self._writer = None
        self._state = "closed"
        waiting, self._closed = self._closed, []
        for done in waiting:
            if isinstance(result, Failure):
                done.errback(result)
            else:
                done.callback(None)

    # -- writes --------------------------------------------------------------

    def _write(
        self,
        apply: Apply,
        early: Any,
        *,
        advance: bool = False,
        lazy: bool = False,
        settling: bool = False,
    ) -> Deferred:
        """
        Queue a write; in ``off`` mode, acknowledge it at once.

        :param early: what the Deferred fires with in ``off`` mode.
        :param advance: whether the write used up :attr:`_next_sequence`.
        :param lazy: see :meth:`GroupCommit.submit`.
        :param settling: see :meth:`GroupCommit.submit`.
        """
        done = self._submit(apply, lazy, settling)
        if self._state == "open" and advance:
            self._next_sequence += 1
        if self.sync != "off" or self._state != "open":
            return done
        done.addErrback(self._lost)
        return succeed(early)

    def _submit(self, apply: Apply, lazy: bool = False, settling: bool = False) -> Deferred:
        """
        Hand an operation to the writer, if the store is open.

        :returns: a Deferred that fires with ``apply``'s result once its group is committed.
        """
        if self._state != "open":
            return fail(StoreNotOpen(f"the message store {self.path} is not open"))
        assert self._writer is not None
        return self._writer.submit(apply, lazy, settling)

    def _lost(self, failure: Failure) -> None:
        """In ``off`` mode, nobody waits for a write: report its failure here."""
        log.failure(
            "write to message store {path} failed after it was acknowledged",
            failure,
            path=str(self.path),
        )

    # -- operations ----------------------------------------------------------

    def recover(self, read_ahead: int = 0) -> Deferred[RecoveredState]:
        """:returns: see :meth:`IMessageStore.recover`; read after every write called before."""
        return self._submit(functools.partial(sqlite_records.recover, read_ahead))

    def page(
        self, queue: str, after: int, first_id: str | None, limit: int
    ) -> Deferred[list[StoredMessage]]:
        """:returns: see :meth:`IMessageStore.page`; read in the writer thread, in store order."""
        return self._submit(
            functools.partial(sqlite_records.read_page, queue, after, first_id, limit)
        )

    def expired(
        self, queue: str, after: int, first_id: str | None, now: float, limit: int
    ) -> Deferred[ExpiredPage]:
        """:returns: see :meth:`IMessageStore.expired`; read in the writer thread, in order."""
        return self._submit(
            functools.partial(sqlite_records.read_expired, queue, after, first_id, now, limit)
        )

    def remove_after(self, queue: str, after: int, first_id: str | None) -> Deferred[None]:
        """:returns: see :meth:`IMessageStore.remove_after`."""
        return self._write(
            functools.partial(sqlite_records.delete_after, queue, after, first_id), None
        )

    def add(self, queue: str, message: MessageFields) -> Deferred[StoredMessage]:
        """:returns: see :meth:`IMessageStore.add`."""
        record = stored_message(queue, self._next_sequence, message)
        insert = sqlite_records.PendingInsert(record)
        if self._state == "open":
            # A second add of one id under one key fails as a duplicate: joins go to the first.
            self._unwritten.setdefault((queue, record.message_id), insert)
        return self._write(insert, record, advance=True)

    def add_transient(self, queue: str, message: MessageFields) -> Deferred[None]:
        """:returns: see :meth:`IMessageStore.add_transient`: lazy, it starts no commit."""
        record = stored_message(queue, self._next_sequence, message, transient=True)
        work = functools.partial(sqlite_records.insert_transient, record)
        return self._write(work, None, advance=True, lazy=True)

    def remove_transient(self, queue: str, through: int) -> Deferred[None]:
        """:returns: see :meth:`IMessageStore.remove_transient`."""
        work = functools.partial(sqlite_records.delete_transient, queue, through)
        return self._write(work, None, lazy=True, settling=True)

    def remove(self, queue: str, message_id: str, *, lazy: bool = False) -> Deferred[None]:
        """:returns: see :meth:`IMessageStore.remove`."""
        insert = self._unwritten.pop((queue, message_id), None)
        if insert is not None:
            # The message is never written: nothing can bring it back.
            insert.dropped = True
            return succeed(None)
        return self._write(
            sqlite_records.Removal(queue, message_id), None, lazy=lazy, settling=True
        )

    def mark_delivered(self, queue: str, message_id: str) -> Deferred[None]:
        """:returns: see :meth:`IMessageStore.mark_delivered`."""
        insert = self._unwritten.get((queue, message_id))
        if insert is not None:
            # The message and its mark become durable together, or neither does.
            insert.marks += 1
            return succeed(None)
        return self._write(
            functools.partial(sqlite_records.mark_delivered, queue, message_id),
            None,
            settling=True,
        )

    def delay(self, queue: str, message_id: str, due: float) -> Deferred[None]:
        """:returns: see :meth:`IMessageStore.delay`."""
        # A later mark must not join the insert: it would land before this update.
        self._unwritten.pop((queue, message_id), None)
        return self._write(
            functools.partial(sqlite_records.delay_message, queue, message_id, due),
            None,
            settling=True,
        )

    def move(
        self, from_queue: str, message_id: str, to_queue: str, message: MessageFields
    ) -> Deferred[StoredMessage]:
        """:returns: see :meth:`IMessageStore.move`."""
        self._unwritten.pop((from_queue, message_id), None)
        record = stored_message(to_queue, self._next_sequence, message)
        work = functools.partial(sqlite_records.move_message, from_queue, message_id, record)
        return self._write(work, record, advance=True)

    def add_subscription(
        self, name: str, destination: str, headers: Headers = ()
    ) -> Deferred[None]:
        """:returns: see :meth:`IMessageStore.add_subscription`."""
        work = functools.partial(
            sqlite_records.save_subscription,
            name,
            destination,
            sqlite_records.encode_headers(headers),
        )
        return self._write(work, None)

    def remove_subscription(self, name: str) -> Deferred[None]:
        """:returns: see :meth:`IMessageStore.remove_subscription`."""
        self._unwritten.clear()
        return self._write(
            functools.partial(sqlite_records.remove_subscription, name), None, settling=True
        )

    def schedule(self, record: ScheduledRecord) -> Deferred[None]:
        """:returns: see :meth:`IMessageStore.schedule`."""
        work = functools.partial(
            sqlite_records.save_scheduled, record, sqlite_records.encode_headers(record.headers)
        )
        return self._write(work, None)

    def unschedule(self, message_id: str) -> Deferred[None]:
        """:returns: see :meth:`IMessageStore.unschedule`."""
        return self._write(
            functools.partial(sqlite_records.delete_scheduled, message_id), None, settling=True
        )

    def retain(self, topic: str, message: MessageFields) -> Deferred[None]:
        """:returns: see :meth:`IMessageStore.retain`."""
        record = stored_message(topic, 0, message)
        work = functools.partial(
            sqlite_records.save_retained,
            topic,
            record,
            sqlite_records.encode_headers(record.headers),
        )
        return self._write(work, None)

    def unretain(self, topic: str) -> Deferred[None]:
        """:returns: see :meth:`IMessageStore.unretain`."""
        return self._write(
            functools.partial(sqlite_records.delete_retained, topic), None, settling=True
        )

    def disk_space(self) -> DiskSpace | None:
        """
        :returns: the room left for the store: the disk's free space and the
            database's free pages as last read (each call has the writer read
            them again for the next); ``None`` if the store is not open or its
            directory cannot be examined.
        """
        if self._state != "open":
            return None
        if not self._reading_free_pages:
            self._reading_free_pages = True
            assert self._writer is not None
            self._writer.submit(free_page_bytes, lazy=True).addBoth(self._read_free_pages)
        try:
            return disk_space(self.data_dir, self._free_pages)
        except OSError:
            return None

    def _read_free_pages(self, result: Any) -> None:
        self._reading_free_pages = False
        if isinstance(result, int):
            self._free_pages = result

    def submit(self, apply: Apply, *, write: bool = True) -> Deferred:
        """
        Run ``apply(connection)`` on the writer, in store order, in the next group:
        what another module keeps in this database (the stream tables,
        :mod:`stompbroker.broker.streams.sqlite_backend`).

        :param write: a write, acknowledged at once in ``off`` mode; else a read.
        :returns: a Deferred of ``apply``'s result.
        """
        return self._write(apply, None) if write else self._submit(apply)


def _filesystem_bytes(path: Path) -> int:
    """:returns: the size of the filesystem ``path`` is on (as large as can be when unknown)."""
    try:
        found = os.statvfs(path)
    except OSError:
        return WAL_SIZE_LIMIT * 16
    return found.f_blocks * found.f_frsize
