"""
Streams in the SQLite message store: :class:`SQLiteStreamBackend`.

Its rows live in the store's database (the ``streams`` and ``stream_entries``
tables of schema 2, :mod:`stompbroker.broker.store.sqlite_schema`) and go
through the store's one writer (:meth:`SQLiteStore.submit`), so that an append
shares the group commit of every other write, and a read, queued after the
appends before it, sees them all.  An append also records the stream's next
offset, which is what keeps offsets growing after retention emptied a stream.
"""

from __future__ import annotations

import sqlite3
from typing import Any

from twisted.internet.defer import Deferred
from zope.interface import implementer

from stompbroker.broker.store.sqlite import SQLiteStore
from stompbroker.broker.store.sqlite_records import decode_headers, encode_headers
from stompbroker.broker.streams.backends import (
    IStreamBackend,
    MemoryStreamBackend,
    RecoveredStream,
)
from stompbroker.broker.streams.entries import StreamEntry, restored, segments_of
from stompbroker.broker.streams.offsets import StreamLimits


def backend_for(store: Any) -> Any:
    """
    :param store: the engine's message store, or ``None``.
    :returns: the stream backend that keeps streams where ``store`` keeps messages:
        the SQLite store's tables, or this process's memory.
    """
    if isinstance(store, SQLiteStore):
        return SQLiteStreamBackend(store)
    return MemoryStreamBackend()


@implementer(IStreamBackend)
class SQLiteStreamBackend:
    """
    Streams in an :class:`~stompbroker.broker.store.sqlite.SQLiteStore`'s database.

    :param store: the store; open before the first call.
    """

    def __init__(self, store: Any) -> None:
        self._store = store

    def append(self, destination: str, entry: StreamEntry) -> Deferred[None]:
        """:returns: a Deferred that fires once the entry is committed."""
        message = entry.message
        row = (
            destination,
            entry.offset,
            entry.timestamp,
            message.message_id,
            encode_headers(message.headers),
            message.body,
        )
        written: Deferred[None] = self._store.submit(lambda connection: _insert(connection, row))
        return written

    def read(self, destination: str, offset: int, limit: int) -> Deferred[list[StreamEntry]]:
        """:returns: a Deferred of up to ``limit`` entries at ``offset`` and after."""
        read: Deferred[list[StreamEntry]] = self._store.submit(
            lambda connection: _select(connection, destination, offset, limit), write=False
        )
        return read

    def trim(self, destination: str, first: int) -> None:
        """Delete the entries before ``first``; a failure is the store's to log."""
        self._store.submit(
            lambda connection: connection.execute(
                "DELETE FROM stream_entries WHERE stream = ? AND position < ?",
                (destination, first),
            )
        ).addErrback(lambda failure: None)

    def recover(self, limits: StreamLimits) -> Deferred[list[RecoveredStream]]:
        """:returns: a Deferred of every stream the database keeps."""
        recovered: Deferred[list[RecoveredStream]] = self._store.submit(
            lambda connection: _recover(connection, limits), write=False
        )
        return recovered


def _insert(connection: sqlite3.Connection, row: tuple[Any, ...]) -> None:
    connection.execute(
        "INSERT INTO stream_entries (stream, position, timestamp, message_id, headers, body)"
        " VALUES (?, ?, ?, ?, ?, ?)",
        row,
    )
    connection.execute(
        "INSERT INTO streams (name, next_offset) VALUES (?, ?)"
        " ON CONFLICT (name) DO UPDATE SET next_offset = excluded.next_offset",
        (row[0], row[1] + 1),
    )


def _select(
    connection: sqlite3.Connection, destination: str, offset: int, limit: int
) -> list[StreamEntry]:
    rows = connection.execute(
        "SELECT position, timestamp, message_id, headers, body FROM stream_entries"
        " WHERE stream = ? AND position >= ? ORDER BY position LIMIT ?",
        (destination, offset, limit),
    )
    return [
        restored(destination, position, timestamp, message_id, decode_headers(headers), body)
        for position, timestamp, message_id, headers, body in rows
    ]


def _recover(connection: sqlite3.Connection, limits: StreamLimits) -> list[RecoveredStream]:
    streams = connection.execute("SELECT name, next_offset FROM streams ORDER BY name").fetchall()
    recovered = []
    for name, next_offset in streams:
        rows = connection.execute(
            "SELECT position, timestamp, length(headers) + length(body) FROM stream_entries"
            " WHERE stream = ? ORDER BY position",
            (name,),
        )
        recovered.append(RecoveredStream(name, next_offset, segments_of(rows, limits)))
    return recovered
