"""
The SQLite store's writer: group commit on one thread.

Theory of operation.  Every operation is turned, in the reactor thread, into a
small function of the database connection and appended to a pending list; its
sequence number (the recovery order) is assigned right there, so the order of
calls is the order on disk.  One writer thread takes the whole pending list as a
*group*, applies it inside one transaction and commits it, with one fsync; each
operation's Deferred fires in the reactor thread once its group is committed.
While the writer works, new operations gather into the next group, so the busier
the broker, the more messages share each fsync.  The reactor thread never touches
the disk after :meth:`~stompbroker.broker.store.sqlite.SQLiteStore.open`.

Consecutive operations of one kind (the inserts of a producer's SENDs, the
deletes of a consumer's ACKs) are written as one statement where their kind
says how (a ``write_run``, see :data:`RunWriter`): one SQLite statement, and one
release of the GIL to the reactor thread and back, rather than one per message.
Only neighbours are joined, so the group is still applied in call order.

:class:`GroupCommit` is an object
:class:`~stompbroker.broker.store.sqlite.SQLiteStore` makes when it opens: the
store keeps its life cycle (the directory's lock, the writer's thread) and its
operations, and hands each write here; this part times the writes (the ``sync``
modes and ``batch_delay`` of :mod:`stompbroker.broker.store.sqlite`) and hands
them between threads.

A full disk (``SQLITE_FULL``) fails the adds and nothing else: the writer
releases the data directory's reserve, writes the group again without what
needs new space (operations submitted as ``settling``: removals, delivery
marks), and refuses such operations with
:class:`~stompbroker.broker.store.base.StoreFull` until there is room again
(:mod:`stompbroker.broker.store.disk_space`), so that consumers can always drain
a queue.
"""

from __future__ import annotations

import functools
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

from attrs import define
from twisted.internet.defer import Deferred
from twisted.python.failure import Failure

from stompbroker.broker.store.base import StoreError, StoreWriteFailed
from stompbroker.broker.store.disk_space import RESUME_BYTES, Reserve, disk_space, free_page_bytes
from stompbroker.broker.store.sqlite_files import store_full, translate_error
from stompbroker.logs import logger

__all__ = ["Apply", "Executor", "GroupCommit", "RunWriter", "StoreStats", "Together", "alone"]

log = logger("stompbroker.store")

#: Runs a function on the writer and returns a Deferred of its result.
Executor = Callable[[Callable[[], Any]], Deferred]
#: One operation, as the writer applies it.
Apply = Callable[[sqlite3.Connection], Any]
#: Applies a run of operations of one kind, consecutive in a group, together:
#: ``write_run(connection, operations)`` returns ``(succeeded, result or
#: error)`` for each, as the operations called one by one would have, failing
#: one with a :class:`StoreError` of its own and the group with an
#: ``sqlite3.Error``.  An operation offers it as its ``write_run`` attribute
#: (one function for the whole kind: the writer joins operations whose
#: ``write_run`` is the same object).
RunWriter = Callable[[sqlite3.Connection, list[Any]], list[tuple[bool, Any]]]
#: ``(settle, outcome)``: runs ``settle(outcome)``, the firing of a committed
#: group's Deferreds; see :class:`GroupCommit`'s ``settle_together``.
Together = Callable[[Callable[[Any], object], Any], None]


def alone(settle: Callable[[Any], object], outcome: Any) -> None:
    """Fire a group's Deferreds with nothing around them (no coalescer: tests, embedding)."""
    settle(outcome)


@define
class StoreStats:
    """
    What the writer has done, for statistics and for tests of group commit.

    :ivar commits: transactions committed.
    :ivar operations: operations those transactions held.
    """

    commits: int = 0
    operations: int = 0


class GroupCommit:
    """
    The pending groups of an open store, and the writer that commits them.

    :param connection: the store's open database, used by the writer alone.
    :param executor: runs the writer's work and returns a Deferred of its result.
    :param reactor: provides ``seconds`` and ``callLater``.
    :param delay: how long a group gathered during a commit may wait for more
        (``batch_delay`` in ``batch`` mode, else 0).
    :param max_batch: most operations in one transaction.
    :param stats: counts the commits.
    :param data_dir: the store's directory, named in its errors.
    :param reserve: the data directory's reserve, released when the disk is
        full; ``None`` for none.
    :param sealed: called in the reactor thread as each group is handed to the
        writer, after which nothing may change its operations (the store's
        :class:`~stompbroker.broker.store.sqlite_records.PendingInsert` stop
        taking what joins them).
    :param settle_together: runs the firing of each committed group's
        Deferreds (see :data:`Together`): twistd passes the transports' write
        coalescer, so that every RECEIPT and MESSAGE a commit releases to one
        connection leaves in one write, as a read's do, instead of one system
        call each.

    :ivar full: the disk filled up and has not had room since: operations that
        are not ``settling`` are refused.  Set by the writer thread.
    """

    def __init__(
        self,
        connection: sqlite3.Connection,
        executor: Executor,
        reactor: Any,
        delay: float,
        max_batch: int,
        stats: StoreStats,
        data_dir: Path,
        reserve: Reserve | None = None,
        sealed: Callable[[], object] = lambda: None,
        settle_together: Together = alone,
    ) -> None:
        self._connection = connection
        self._sealed = sealed
        self._together = settle_together
        self._executor = executor
        self._reactor = reactor
        self._delay = delay
        self._max_batch = max_batch
        self._stats = stats
        self._data_dir = data_dir
        self._reserve = reserve
        self.full = False
        #: What the log last said of :attr:`full`: one line when it starts, one when it ends.
        self._full_logged = False
        #: Operations refused for a full disk since it filled, for the line when it ends.
        self.refused = 0
        #: The pending operations, their Deferreds and whether each is
        #: settling (see :meth:`submit`): three lists, not an object each.
        self._pending: list[Apply] = []
        self._deferreds: list[Deferred] = []
        self._settling: list[bool] = []
        self._timer: Any = None
        self._writing = False
        #: When the first operation pending for the next group arrived during a commit.
        self._gathering_since = 0.0
        #: When the commit in flight was handed to the writer.
        self._commit_started = 0.0
        #: Whether an operation that is not lazy is pending (see :meth:`submit`).
        self._urgent = False
        #: Fires once the connection is closed, after what was pending; see :meth:`close`.
        self._closed: Deferred[None] | None = None

    def submit(self, apply: Apply, lazy: bool = False, settling: bool = False) -> Deferred:
        """
        Append an operation to the pending group and see that it gets written.

        :param lazy: nobody waits for it: in ``batch`` mode it starts no commit
            of its own before ``batch_delay`` has passed, and rides with the next
            operation that does.
        :param settling: it needs no new space in the database (a removal, a
            delivery mark): it is written even when the disk is full.
        :returns: a Deferred that fires with ``apply``'s result once its group is committed.
        """
        done: Deferred = Deferred()
        pending = self._pending
        pending.append(apply)
        self._deferreds.append(done)
        self._settling.append(settling)
        if self._writing:
            # Group commit: gather for the next group while this one commits.
            if not (lazy or self._urgent):
                self._urgent = True
                self._gathering_since = self._reactor.seconds()
            return done
        if len(pending) >= self._max_batch:
            self._write_group()
        elif lazy and self._delay:
            if self._timer is None:
                self._timer = self._reactor.callLater(self._delay, self._write_group)
        elif not self._urgent or self._timer is None:
            # The writer is idle: write what this reactor turn brings, at its end.
            self._urgent = True
            if self._timer is not None:
                self._timer.cancel()
            self._timer = self._reactor.callLater(0, self._write_group)
        return done

    def close(self) -> Deferred[None]:
        """
        Commit what is pending, then close the connection on the writer.  Call
        once, and submit nothing after.

        :returns: a Deferred that fires once the connection is closed (or fails
            as closing it did).
        """
        self._closed = Deferred()
        if not self._writing:
            self._write_group()
        return self._closed

    def _write_group(self) -> None:
        """Hand the pending operations to the writer as one group, or finish closing."""
        if self._timer is not None:
            if self._timer.active():
                self._timer.cancel()
            self._timer = None
        if not self._pending:
            if self._closed is not None:
                self._finish_closing()
            return
        most = self._max_batch
        work, deferreds, settling = (
            self._pending[:most],
            self._deferreds[:most],
            self._settling[:most],
        )
        del self._pending[:most], self._deferreds[:most], self._settling[:most]
        # What is left of a group over max_batch goes next, as if urgent.
        self._urgent = bool(self._pending)
        self._gathering_since = self._reactor.seconds()
        self._writing = True
        self._commit_started = self._reactor.seconds()
        self._sealed()
        written = self._executor(functools.partial(self._commit, work, settling))
        written.addBoth(self._group_done, deferreds)

    def _commit(self, work: list[Apply], settling: list[bool]) -> list[tuple[bool, Any]]:
        """
        In the writer thread: apply a group in one transaction and commit it.

        An operation that fails with a :class:`StoreError` fails alone (it wrote
        nothing); an SQLite error fails the whole group, which is rolled back,
        except a full disk: then the group is written again without what needs
        space (see the module notes).

        :returns: ``(succeeded, result or error)`` per operation.
        """
        if self.full and not self._room_again():
            return self._commit_settling(work, settling)
        try:
            return self._apply(work)
        except sqlite3.Error as error:
            if not getattr(error, "sqlite_errorname", "").startswith("SQLITE_FULL"):
                raise translate_error(error, StoreWriteFailed, self._data_dir) from error
        self.full = True
        if self._reserve is not None:
            self._reserve.release()
        return self._commit_settling(work, settling)

    def _commit_settling(self, work: list[Apply], settling: list[bool]) -> list[tuple[bool, Any]]:
        """
        In the writer thread, the disk full: apply a group's settling operations
        alone, and refuse the others.

        :raises StoreFull: if even those cannot be written.
        """
        kept = [apply for apply, settles in zip(work, settling, strict=True) if settles]
        refused = len(work) - len(kept)
        self.refused += refused
        try:
            done = iter(self._apply(kept)) if kept else iter(())
        except sqlite3.Error as error:
            self.refused += len(kept)
            raise store_full(self._data_dir) from error
        full = store_full(self._data_dir)
        return [next(done) if settles else (False, full) for settles in settling]

    def _room_again(self) -> bool:
        """
        In the writer thread, the disk full: whether there is room again, in
        which case the store takes every write and its reserve is made again.
        """
        try:
            room = disk_space(self._data_dir, free_page_bytes(self._connection)).free
        except (OSError, sqlite3.Error):
            return False
        if room < RESUME_BYTES:
            return False
        self.full = False
        if self._reserve is not None:
            self._reserve.make()
        return True

    def _apply(self, work: list[Apply]) -> list[tuple[bool, Any]]:
        """
        In the writer thread: apply operations in one transaction and commit it.

        :raises sqlite3.Error: as SQLite failed, the transaction rolled back.
        :raises StoreWriteFailed: if rolling back failed too.
        """
        connection = self._connection
        outcomes: list[tuple[bool, Any]] = []
        count = len(work)
        try:
            connection.execute("BEGIN IMMEDIATE")
            start = 0
            while start < count:
                apply = work[start]
                write_run = getattr(apply, "write_run", None)
                end = start + 1
                if write_run is not None:
                    while end < count and getattr(work[end], "write_run", None) is write_run:
                        end += 1
                if end - start > 1:
                    outcomes.extend(write_run(connection, work[start:end]))  # type: ignore[misc]
                else:
                    try:
                        outcomes.append((True, apply(connection)))
                    except StoreError as error:
                        outcomes.append((False, error))
                start = end
            connection.execute("COMMIT")
        except sqlite3.Error as error:
            try:
                if connection.in_transaction:
                    connection.execute("ROLLBACK")
            except sqlite3.Error as rollback_error:
                raise translate_error(rollback_error, StoreWriteFailed, self._data_dir) from error
            raise
        return outcomes

    def _group_done(self, outcomes: Any, group: list[Deferred]) -> None:
        """In the reactor thread: fire the group's Deferreds, then start the next group."""
        self._writing = False
        if self.full != self._full_logged:
            self._log_full()
        self._together(self._settle, (outcomes, group))
        self._next_group()

    def _settle(self, done: tuple[Any, list[Deferred]]) -> None:
        """Fire a group's Deferreds, with its results or its failure."""
        outcomes, group = done
        if isinstance(outcomes, Failure):
            for deferred in group:
                deferred.errback(outcomes)
        else:
            self._stats.commits += 1
            self._stats.operations += len(group)
            for deferred, (succeeded, result) in zip(group, outcomes, strict=True):
                if succeeded:
                    deferred.callback(result)
                else:
                    deferred.errback(Failure(result))

    def _next_group(self) -> None:
        """After a commit: start the next group now, or when it has gathered enough."""
        if self._writing or self._timer is not None:
            return
        if self._closed is not None or len(self._pending) >= self._max_batch:
            self._write_group()
        elif self._pending:
            now = self._reactor.seconds()
            if self._urgent:
                wait = self._gathering_since + min(self._delay, now - self._commit_started) - now
            else:
                wait = self._delay
            if wait > 0:
                self._timer = self._reactor.callLater(wait, self._write_group)
            else:
                self._write_group()

    def _log_full(self) -> None:
        """Say once that the disk is full, and once that it has room again."""
        self._full_logged = self.full
        if self.full:
            log.error(
                "the disk of the message store {path} is full: persistent messages are"
                " refused until there is room again; acknowledgements are still stored",
                path=str(self._data_dir),
            )
        else:
            log.info(
                "the disk of the message store {path} has room again: {refused} writes"
                " were refused meanwhile",
                path=str(self._data_dir),
                refused=self.refused,
            )
            self.refused = 0

    def _finish_closing(self) -> None:
        """Close the connection on the writer, and say so."""
        assert self._closed is not None
        self._writing = True
        self._executor(self._connection.close).chainDeferred(self._closed)
