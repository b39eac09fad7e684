"""
The tables of the SQLite store, and their version: its on-disk format.

``messages`` holds one row per stored message, keyed by its ``sequence`` (the
recovery order) and unique by ``(queue, message_id)``; ``subscriptions`` holds
the durable subscriptions; ``scheduled`` the persistent scheduled messages, by
message-id, and ``retained`` each topic's persistent retained message; ``streams``
each stream's next offset (so that offsets keep growing when retention has emptied
it) and ``stream_entries`` its messages by ``(stream, position)``
(:mod:`stompbroker.broker.streams.sqlite_backend`).  The last four came with
schema 2, and ``messages.due`` (when a NACKed message may be delivered again)
with schema 3, and ``duplicate_ids`` (the duplicate-detection ids of persistent
messages, :mod:`stompbroker.broker.features.duplicate_ids`, written in the
transaction that inserts their message) with schema 4, and ``messages.transient``
(a non-persistent message a paged queue keeps on disk, dropped at the next
start) with its partial index ``messages_transient`` (which finds them without
reading the persistent rows: a restart drops them in one statement however
large the backlog) with schema 5; an older database is migrated when it is
opened.  ``PRAGMA user_version`` records
:data:`SCHEMA_VERSION`, so that a store written by a newer stompbroker is refused
rather than misread, and a database that is not a stompbroker store at all is
never written to.  A change to these tables is a change of the format every
existing data directory holds: it needs a new version and a way to read the
old: :func:`prepare_schema` brings a schema 1 database to schema 2 by adding
the tables schema 2 added, a schema 2 one to schema 3 by adding the
column (nothing else changed), a schema 3 one to schema 4 by adding its
table, and a schema 4 one to schema 5 by adding its column and index, each step
in one transaction, when a newer stompbroker first opens it.

The index ``messages_by_queue`` on ``(queue, sequence)`` (each key's messages in
order, for a paged queue's reads and a recovery's counts) is no part of the
format: any version reads a database with it or without it, and keeps it up to
date; the store makes it when it opens a database that lacks it.  So is the
partial index ``messages_by_expiry`` on ``(queue, expires)`` of the messages
that expire (``expires > 0``): a paged queue's sweep for expired messages
(:mod:`stompbroker.broker.queueing.paged_expiry`) reads its ranges, and a message
without an expiry costs it nothing, neither a write nor a byte.

What goes in and out of the rows is :mod:`stompbroker.broker.store.sqlite_records`.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from stompbroker.broker.store.base import StoreIncompatible
from stompbroker.broker.store.sqlite_files import store_damaged

__all__ = ["SCHEMA_VERSION", "prepare_schema"]

#: The schema this code writes, kept in ``PRAGMA user_version``.
SCHEMA_VERSION = 5

#: What schema 5 added: transient rows, and the index that finds them alone.
_SCHEMA_5_CHANGES = (
    "ALTER TABLE messages ADD COLUMN transient INTEGER NOT NULL DEFAULT 0",
    "CREATE INDEX messages_transient ON messages (queue, sequence) WHERE transient",
)

#: What schema 4 added: the duplicate-detection ids of persistent messages.
_SCHEMA_4_TABLES = (
    """
    CREATE TABLE duplicate_ids (
        destination TEXT NOT NULL,
        duplicate_id TEXT NOT NULL,
        PRIMARY KEY (destination, duplicate_id)
    )
    """,
)

#: What schema 2 added to schema 1: scheduled and retained messages, and streams.
_SCHEMA_2_TABLES = (
    """
    CREATE TABLE scheduled (
        message_id TEXT PRIMARY KEY,
        destination TEXT NOT NULL,
        headers TEXT NOT NULL,
        body BLOB NOT NULL,
        due INTEGER NOT NULL,
        period INTEGER NOT NULL,
        remaining INTEGER NOT NULL,
        fired INTEGER NOT NULL
    )
    """,
    """
    CREATE TABLE retained (
        topic TEXT PRIMARY KEY,
        message_id TEXT NOT NULL,
        destination TEXT NOT NULL,
        headers TEXT NOT NULL,
        body BLOB NOT NULL,
        expires REAL NOT NULL
    )
    """,
    """
    CREATE TABLE streams (
        name TEXT PRIMARY KEY,
        next_offset INTEGER NOT NULL
    )
    """,
    """
    CREATE TABLE stream_entries (
        stream TEXT NOT NULL,
        position INTEGER NOT NULL,
        timestamp REAL NOT NULL,
        message_id TEXT NOT NULL,
        headers TEXT NOT NULL,
        body BLOB NOT NULL,
        PRIMARY KEY (stream, position)
    ) WITHOUT ROWID
    """,
)

_SCHEMA = (
    """
    CREATE TABLE messages (
        sequence INTEGER PRIMARY KEY,
        queue TEXT NOT NULL,
        message_id TEXT NOT NULL,
        destination TEXT NOT NULL,
        headers TEXT NOT NULL,
        body BLOB NOT NULL,
        expires REAL NOT NULL,
        delivered INTEGER NOT NULL DEFAULT 0,
        redelivery_count INTEGER NOT NULL DEFAULT 0,
        due REAL NOT NULL DEFAULT 0,
        UNIQUE (queue, message_id)
    )
    """,
    """
    CREATE TABLE subscriptions (
        name TEXT PRIMARY KEY,
        destination TEXT NOT NULL,
        headers TEXT NOT NULL
    )
    """,
    *_SCHEMA_2_TABLES,
    *_SCHEMA_4_TABLES,
    *_SCHEMA_5_CHANGES,
    f"PRAGMA user_version = {SCHEMA_VERSION}",
)

#: The index a paged queue's reads and a recovery's counts use: each key's
#: messages in sequence order (:mod:`stompbroker.broker.queueing.paging`).
_QUEUE_ORDER_INDEX = "CREATE INDEX IF NOT EXISTS messages_by_queue ON messages (queue, sequence)"

#: The index a paged queue's expiry sweep reads: each key's expiring messages by expiry.
_EXPIRY_INDEX = (
    "CREATE INDEX IF NOT EXISTS messages_by_expiry ON messages (queue, expires) WHERE expires > 0"
)

#: Schema version -> the statements that bring it to the next one.
_MIGRATIONS = {
    1: (*_SCHEMA_2_TABLES, "PRAGMA user_version = 2"),
    2: (
        "ALTER TABLE messages ADD COLUMN due REAL NOT NULL DEFAULT 0",
        "PRAGMA user_version = 3",
    ),
    3: (*_SCHEMA_4_TABLES, "PRAGMA user_version = 4"),
    4: (*_SCHEMA_5_CHANGES, "PRAGMA user_version = 5"),
}


def prepare_schema(connection: sqlite3.Connection, path: Path) -> None:
    """
    Create the tables of a new (empty) database, or check that an existing one is
    a stompbroker store this code can read, bringing an older one to schema 5.

    :param connection: the store's connection, outside any transaction.
    :param path: the database file, for the error messages.
    :raises StoreIncompatible: a newer stompbroker wrote it.
    :raises StoreDamaged: it holds tables, but is not a stompbroker store.
    :raises sqlite3.Error: as SQLite reports it; the store names it for the operator.
    """
    (version,) = connection.execute("PRAGMA user_version").fetchone()
    tables = connection.execute("SELECT name FROM sqlite_schema WHERE type = 'table'").fetchall()
    if version > SCHEMA_VERSION:
        raise StoreIncompatible(
            f"{path} was written by a newer stompbroker (schema {version};"
            f" this one reads {SCHEMA_VERSION}); run that version, or move the"
            " file away to start with an empty store"
        )
    if version == 0 and tables:
        raise store_damaged(path, "it holds tables that are not a stompbroker store")
    if version == 0:
        _run(connection, _SCHEMA)
        version = SCHEMA_VERSION
    while version in _MIGRATIONS:
        _run(connection, _MIGRATIONS[version])
        version += 1
    # Not part of the format (an older stompbroker reads and keeps it up): made
    # on first open, a minute or so for a store of millions of messages.
    connection.execute(_QUEUE_ORDER_INDEX)
    connection.execute(_EXPIRY_INDEX)


def _run(connection: sqlite3.Connection, statements: tuple[str, ...]) -> None:
    """Run statements in one transaction: a crash leaves the old schema or the new."""
    connection.execute("BEGIN IMMEDIATE")
    try:
        for statement in statements:
            connection.execute(statement)
    except BaseException:
        connection.execute("ROLLBACK")
        raise
    connection.execute("COMMIT")
