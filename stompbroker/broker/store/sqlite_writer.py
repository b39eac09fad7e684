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

:class:`GroupCommit` is a mixin of
:class:`~stompbroker.broker.store.sqlite.SQLiteStore`, apart from its life cycle
and its operations because this is the part that times the writes (the ``sync``
modes and ``batch_delay`` of :mod:`stompbroker.broker.store.sqlite`) and hands
them between threads; the store's ``__init__`` sets the state declared here.
"""

from __future__ import annotations

import functools
import os
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

from attrs import define, frozen
from twisted.internet.defer import Deferred, fail, succeed
from twisted.python.failure import Failure
from twisted.python.threadpool import ThreadPool

from stompbroker.broker.store.base import StoreError, StoreNotOpen, StoreWriteFailed
from stompbroker.broker.store.sqlite_files import translate_error
from stompbroker.logs import logger

__all__ = ["Apply", "Executor", "GroupCommit", "StoreStats"]

log = logger("stompbroker.store")

#: Runs a function on the writer and returns a Deferred of its result.
Executor = Callable[[Callable[[], Any]], Deferred]
#: One operation, as the writer applies it.
Apply = Callable[[sqlite3.Connection], Any]


@define
class StoreStats:
    """
    What the writer has done, for statistics and for tests of group commit.

    :ivar commits: transactions committed.
    :ivar operations: operations those transactions held.
    """

    commits: int = 0
    operations: int = 0


@frozen
class _Operation:
    """One pending operation: what the writer does, and whom to tell."""

    apply: Apply
    deferred: Deferred


class GroupCommit:
    """The pending groups of a store, and the writer thread that commits them."""

    data_dir: Path
    path: Path
    sync: str
    stats: StoreStats
    _reactor: Any
    _delay: float
    _max_batch: int
    _executor: Executor | None
    _pool: ThreadPool | None
    _shutdown_trigger: Any
    _lock_fd: int | None
    _connection: sqlite3.Connection | None
    _state: str
    _next_sequence: int
    _pending: list[_Operation]
    _timer: Any
    _writing: bool
    _gathering_since: float
    _commit_started: float
    _urgent: bool
    _closed: list[Deferred[None]]

    def _write(
        self, apply: Apply, early: Any, *, advance: bool = False, lazy: bool = False
    ) -> Deferred:
        """
        Queue a write; in ``off`` mode, acknowledge it at once.

        :param early: what the Deferred fires with in ``off`` mode.
        :param advance: whether the write used up :attr:`_next_sequence`.
        :param lazy: see :meth:`_submit`.
        """
        done = self._submit(apply, lazy)
        if self._state == "open" and advance:
            self._next_sequence += 1
        if self.sync != "off" or self._state != "open":
            return done
        done.addErrback(self._lost)
        return succeed(early)

    def _submit(self, apply: Apply, lazy: bool = False) -> Deferred:
        """
        Append an operation to the pending group and see that it gets written.

        :param lazy: nobody waits for it: in ``batch`` mode it starts no commit
            of its own before ``batch_delay`` has passed, and rides with the next
            operation that does.
        :returns: a Deferred that fires with ``apply``'s result once its group is committed.
        """
        if self._state != "open":
            return fail(StoreNotOpen(f"the message store {self.path} is not open"))
        done: Deferred = Deferred()
        pending = self._pending
        pending.append(_Operation(apply, done))
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

    def _write_group(self) -> None:
        """Hand the pending operations to the writer as one group, or finish closing."""
        if self._timer is not None:
            if self._timer.active():
                self._timer.cancel()
            self._timer = None
        if not self._pending:
            if self._state == "closing":
                self._finish_closing()
            return
        group = self._pending[: self._max_batch]
        del self._pending[: self._max_batch]
        # What is left of a group over max_batch goes next, as if urgent.
        self._urgent = bool(self._pending)
        self._gathering_since = self._reactor.seconds()
        self._writing = True
        self._commit_started = self._reactor.seconds()
        assert self._executor is not None
        written = self._executor(functools.partial(self._commit, [op.apply for op in group]))
        written.addBoth(self._group_done, group)

    def _commit(self, work: list[Apply]) -> list[tuple[bool, Any]]:
        """
        In the writer thread: apply a group in one transaction and commit it.

        An operation that fails with a :class:`StoreError` fails alone (it wrote
        nothing); an SQLite error fails the whole group, which is rolled back.

        :returns: ``(succeeded, result or error)`` per operation.
        """
        connection = self._connection
        assert connection is not None
        outcomes: list[tuple[bool, Any]] = []
        try:
            connection.execute("BEGIN IMMEDIATE")
            for apply in work:
                try:
                    outcomes.append((True, apply(connection)))
                except StoreError as error:
                    outcomes.append((False, error))
            connection.execute("COMMIT")
        except sqlite3.Error as error:
            failure = translate_error(error, StoreWriteFailed, self.data_dir)
            try:
                if connection.in_transaction:
                    connection.execute("ROLLBACK")
            except sqlite3.Error as rollback_error:
                raise translate_error(rollback_error, StoreWriteFailed, self.data_dir) from error
            raise failure from error
        return outcomes

    def _group_done(self, outcomes: Any, group: list[_Operation]) -> None:
        """In the reactor thread: fire the group's Deferreds, then start the next group."""
        self._writing = False
        if isinstance(outcomes, Failure):
            for operation in group:
                operation.deferred.errback(outcomes)
        else:
            self.stats.commits += 1
            self.stats.operations += len(group)
            for operation, (succeeded, result) in zip(group, outcomes, strict=True):
                if succeeded:
                    operation.deferred.callback(result)
                else:
                    operation.deferred.errback(Failure(result))
        if self._writing or self._timer is not None:
            return
        if self._state == "closing" or len(self._pending) >= self._max_batch:
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

    def _finish_closing(self) -> None:
        """Close the connection on the writer, then stop it and release the lock."""
        assert self._executor is not None and self._connection is not None
        self._writing = True
        self._executor(self._connection.close).addBoth(self._released)

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
        self._writing = False
        self._state = "closed"
        waiting, self._closed = self._closed, []
        for done in waiting:
            if isinstance(result, Failure):
                done.errback(result)
            else:
                done.callback(None)

    def _lost(self, failure: Failure) -> None:
        """In ``off`` mode, nobody waits for a write: report its failure here."""
        log.failure(
            "write to message store {path} failed after it was acknowledged",
            failure,
            path=str(self.path),
        )
