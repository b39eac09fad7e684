"""
The on-disk format of :class:`~stompbroker.broker.store.sqlite.SQLiteStore`
(:mod:`stompbroker.broker.store.sqlite_schema`): the tables of schemas 1 to 3,
bringing a schema 1 or 2 database to schema 3, and refusing a database that is not a
stompbroker store or was written by a newer one.

Schemas 1 to 3 are written out here by hand, not taken from the code, so that a change
to the tables the code makes fails these tests instead of silently orphaning
every data directory already in use.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from twisted.internet import task

from stompbroker.broker.store import sqlite_records
from stompbroker.broker.store.base import (
    DurableSubscription,
    ScheduledRecord,
    StoreDamaged,
    StoredMessage,
    StoreIncompatible,
)
from stompbroker.broker.store.sqlite import DATABASE_NAME
from tests.support.store import open_sqlite, result_of, sent, sqlite_store

#: Schema 1, as docs/persistence.md and every data directory so far know it.
SCHEMA_1 = """
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
    UNIQUE (queue, message_id)
);
CREATE TABLE subscriptions (
    name TEXT PRIMARY KEY,
    destination TEXT NOT NULL,
    headers TEXT NOT NULL
);
PRAGMA user_version = 1;
"""

#: What schema 2 added: persistent scheduled and retained messages, and the streams.
SCHEMA_2_ADDED = """
CREATE TABLE scheduled (
    message_id TEXT PRIMARY KEY,
    destination TEXT NOT NULL,
    headers TEXT NOT NULL,
    body BLOB NOT NULL,
    due INTEGER NOT NULL,
    period INTEGER NOT NULL,
    remaining INTEGER NOT NULL,
    fired INTEGER NOT NULL
);
CREATE TABLE retained (
    topic TEXT PRIMARY KEY,
    message_id TEXT NOT NULL,
    destination TEXT NOT NULL,
    headers TEXT NOT NULL,
    body BLOB NOT NULL,
    expires REAL NOT NULL
);
CREATE TABLE streams (
    name TEXT PRIMARY KEY,
    next_offset INTEGER NOT NULL
);
CREATE TABLE stream_entries (
    stream TEXT NOT NULL,
    position INTEGER NOT NULL,
    timestamp REAL NOT NULL,
    message_id TEXT NOT NULL,
    headers TEXT NOT NULL,
    body BLOB NOT NULL,
    PRIMARY KEY (stream, position)
) WITHOUT ROWID;
PRAGMA user_version = 2;
"""

#: What schema 3 added: when a NACKed message may be delivered again.
SCHEMA_3_ADDED = """
ALTER TABLE messages ADD COLUMN due REAL NOT NULL DEFAULT 0;
PRAGMA user_version = 3;
"""

#: What schema 4 added: the duplicate-detection ids of persistent messages.
SCHEMA_4_ADDED = """
CREATE TABLE duplicate_ids (
    destination TEXT NOT NULL,
    duplicate_id TEXT NOT NULL,
    PRIMARY KEY (destination, duplicate_id)
);
PRAGMA user_version = 4;
"""

#: What schema 5 added: transient rows (non-persistent messages a paged queue keeps on disk).
SCHEMA_5_ADDED = """
ALTER TABLE messages ADD COLUMN transient INTEGER NOT NULL DEFAULT 0;
CREATE INDEX messages_transient ON messages (queue, sequence) WHERE transient;
PRAGMA user_version = 5;
"""

#: Every schema's statements, from the first.
SCHEMA_5 = SCHEMA_1 + SCHEMA_2_ADDED + SCHEMA_3_ADDED + SCHEMA_4_ADDED + SCHEMA_5_ADDED


def table_layout(path: Path) -> dict[str, list[tuple[object, ...]]]:
    """:returns: each table's columns (name, type, not null, default, key) and the version."""
    with sqlite3.connect(path) as database:
        layout = {
            table: [tuple(column[1:]) for column in database.execute(f"PRAGMA table_info({table})")]
            for table in (
                "messages",
                "subscriptions",
                "scheduled",
                "retained",
                "streams",
                "stream_entries",
                "duplicate_ids",
            )
        }
        layout["user_version"] = database.execute("PRAGMA user_version").fetchall()
    return layout


def test_a_new_store_makes_the_tables_of_schema_5(tmp_path: Path) -> None:
    """A new data directory gets exactly schema 5's tables, columns and version."""
    result_of(open_sqlite(tmp_path / "new", task.Clock()).close())
    (tmp_path / "by-hand").mkdir()
    with sqlite3.connect(tmp_path / "by-hand" / DATABASE_NAME) as database:
        database.executescript(SCHEMA_5)
    made = table_layout(tmp_path / "new" / DATABASE_NAME)
    assert made == table_layout(tmp_path / "by-hand" / DATABASE_NAME)
    assert made["user_version"] == [(5,)]


def test_a_schema_1_store_is_brought_to_schema_5(tmp_path: Path) -> None:
    """
    A schema 1 data directory gets schema 2's to 5's additions and version when opened,
    keeps its messages and durable subscriptions, and then keeps scheduled and
    retained messages across a reopen.
    """
    with sqlite3.connect(tmp_path / DATABASE_NAME) as database:
        database.executescript(SCHEMA_1)
        database.execute(
            "INSERT INTO messages (sequence, queue, message_id, destination, headers, body,"
            " expires) VALUES (1, '/queue/a', 'm-1', '/queue/a', '[]', x'', 0)"
        )
        database.execute(
            "INSERT INTO subscriptions (name, destination, headers) VALUES ('s', '/topic/a', '[]')"
        )
    (tmp_path / "by-hand").mkdir()
    with sqlite3.connect(tmp_path / "by-hand" / DATABASE_NAME) as database:
        database.executescript(SCHEMA_5)
    clock = task.Clock()
    store = open_sqlite(tmp_path, clock)
    assert table_layout(tmp_path / DATABASE_NAME) == table_layout(
        tmp_path / "by-hand" / DATABASE_NAME
    )
    writes = [
        store.schedule(ScheduledRecord("m-2", "/queue/a", (("x-delay", "5"),), b"s", 1000, 0, 0)),
        store.retain("/topic/t", sent("m-3", "/topic/t")),
    ]
    clock.advance(1)
    for write in writes:
        result_of(write)
    result_of(store.close())
    with sqlite3.connect(tmp_path / DATABASE_NAME) as database:
        assert database.execute("SELECT name FROM subscriptions").fetchall() == [("s",)]
    reopened = open_sqlite(tmp_path, clock)
    recovering = reopened.recover()
    clock.advance(1)
    state = result_of(recovering)
    assert [record.message_id for record in state.queues["/queue/a"]] == ["m-1"]
    assert state.scheduled == (
        ScheduledRecord("m-2", "/queue/a", (("x-delay", "5"),), b"s", 1000, 0, 0),
    )
    assert [(record.queue, record.message_id) for record in state.retained] == [("/topic/t", "m-3")]
    result_of(reopened.close())


def old_store_with_a_message(path: Path, script: str) -> task.Clock:
    """
    Write a database of an older schema holding one message, ``m-1`` in ``/queue/a``.

    :returns: a clock for the store the test opens on it.
    """
    with sqlite3.connect(path / DATABASE_NAME) as database:
        database.executescript(script)
        database.execute(
            "INSERT INTO messages (sequence, queue, message_id, destination, headers, body,"
            " expires) VALUES (1, '/queue/a', 'm-1', '/queue/a', '[]', x'', 0)"
        )
    return task.Clock()


def test_a_schema_3_store_is_brought_to_schema_5_and_keeps_its_messages(
    tmp_path: Path,
) -> None:
    """
    A schema 3 data directory gets the ``duplicate_ids`` table when opened, keeps its
    messages, and a persistent message's duplicate-detection id is then stored with it.
    """
    clock = old_store_with_a_message(tmp_path, SCHEMA_1 + SCHEMA_2_ADDED + SCHEMA_3_ADDED)
    store = open_sqlite(tmp_path, clock)
    assert table_layout(tmp_path / DATABASE_NAME)["user_version"] == [(5,)]
    adding = store.add("/queue/a", sent("m-2", "/queue/a", headers=(("duplicate-id", "d-2"),)))
    clock.advance(1)
    result_of(adding)
    result_of(store.close())
    with sqlite3.connect(tmp_path / DATABASE_NAME) as database:
        assert database.execute("SELECT message_id FROM messages ORDER BY sequence").fetchall() == [
            ("m-1",),
            ("m-2",),
        ]
        assert database.execute("SELECT * FROM duplicate_ids").fetchall() == [("/queue/a", "d-2")]


def test_a_schema_4_store_is_brought_to_schema_5_and_keeps_its_messages_persistent(
    tmp_path: Path,
) -> None:
    """
    A schema 4 data directory gets the ``transient`` column and its partial index
    when opened; the messages it held are persistent (not transient), so a
    restart keeps them, and finding the transient rows reads only the index.
    """
    clock = old_store_with_a_message(
        tmp_path, SCHEMA_1 + SCHEMA_2_ADDED + SCHEMA_3_ADDED + SCHEMA_4_ADDED
    )
    store = open_sqlite(tmp_path, clock)
    assert table_layout(tmp_path / DATABASE_NAME)["user_version"] == [(5,)]
    result_of(store.close())
    reopened = open_sqlite(tmp_path, clock)
    recovering = reopened.recover()
    clock.advance(1)
    (record,) = result_of(recovering).queues["/queue/a"]
    assert (record.message_id, record.transient) == ("m-1", False)
    result_of(reopened.close())
    with sqlite3.connect(tmp_path / DATABASE_NAME) as database:
        plan = database.execute(
            "EXPLAIN QUERY PLAN DELETE FROM messages WHERE transient"
        ).fetchall()
    assert "messages_transient" in " ".join(str(step[-1]) for step in plan)


def test_a_schema_2_store_is_brought_to_schema_5_and_keeps_due_times(tmp_path: Path) -> None:
    """
    A schema 2 data directory gets the ``due`` column when opened (its messages
    due at once), and a NACKed message's due time then survives a reopen.
    """
    with sqlite3.connect(tmp_path / DATABASE_NAME) as database:
        database.executescript(SCHEMA_1 + SCHEMA_2_ADDED)
        database.execute(
            "INSERT INTO messages (sequence, queue, message_id, destination, headers, body,"
            " expires, delivered) VALUES (1, '/queue/a', 'm-1', '/queue/a', '[]', x'', 0, 1)"
        )
    clock = task.Clock()
    store = open_sqlite(tmp_path, clock)
    assert table_layout(tmp_path / DATABASE_NAME)["user_version"] == [(5,)]
    delaying = store.delay("/queue/a", "m-1", 1234.5)
    clock.advance(1)
    result_of(delaying)
    result_of(store.close())
    reopened = open_sqlite(tmp_path, clock)
    recovering = reopened.recover()
    clock.advance(1)
    (record,) = result_of(recovering).queues["/queue/a"]
    assert (record.due, record.redeliveries) == (1234.5, 1)
    marking = reopened.mark_delivered("/queue/a", "m-1")
    clock.advance(1)
    result_of(marking)
    recovering = reopened.recover()
    clock.advance(1)
    (record,) = result_of(recovering).queues["/queue/a"]
    assert (record.due, record.redeliveries) == (0.0, 2)
    result_of(reopened.close())


def test_a_schema_1_database_written_by_hand_is_recovered(tmp_path: Path) -> None:
    """
    Rows of schema 1 recover as they were written: headers as a JSON list of pairs (order
    and repeats kept), delivery counts, subscriptions and their backlogs; sequences go on.
    """
    with sqlite3.connect(tmp_path / DATABASE_NAME) as database:
        database.executescript(SCHEMA_1)
        database.executemany(
            "INSERT INTO messages (sequence, queue, message_id, destination, headers, body,"
            " expires, delivered, redelivery_count) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [
                (3, "sub-a", "m-2", "/topic/a", "[]", b"", 12.5, 0, 0),
                (
                    7,
                    "/queue/orders",
                    "m-1",
                    "/queue/orders",
                    '[["a", "1"], ["a", "2"]]',
                    b"x",
                    0,
                    1,
                    2,
                ),
            ],
        )
        database.execute(
            "INSERT INTO subscriptions (name, destination, headers) VALUES (?, ?, ?)",
            ("sub-a", "/topic/a", '[["ack", "client"]]'),
        )
    clock = task.Clock()
    store = open_sqlite(tmp_path, clock)
    recovering = store.recover()
    clock.advance(1)
    state = result_of(recovering)
    assert state.queues == {
        "/queue/orders": (
            StoredMessage(
                "/queue/orders",
                7,
                "m-1",
                "/queue/orders",
                (("a", "1"), ("a", "2")),
                b"x",
                0.0,
                True,
                2,
            ),
        )
    }
    assert state.subscriptions == (DurableSubscription("sub-a", "/topic/a", (("ack", "client"),)),)
    assert state.backlogs == {
        "sub-a": (StoredMessage("sub-a", 3, "m-2", "/topic/a", (), b"", 12.5),)
    }
    adding = store.add("/queue/orders", sent("m-3"))
    clock.advance(1)
    assert result_of(adding).sequence == 8
    result_of(store.close())


def test_a_foreign_database_is_damaged(tmp_path: Path) -> None:
    """An SQLite database that is not a stompbroker store is refused, not written to."""
    with sqlite3.connect(tmp_path / DATABASE_NAME) as foreign:
        foreign.execute("CREATE TABLE accounts (id INTEGER)")
    store = sqlite_store(tmp_path)
    with pytest.raises(StoreDamaged, match="not a stompbroker store"):
        store.open()


def test_a_newer_schema_is_incompatible(tmp_path: Path) -> None:
    """A store written by a newer stompbroker is refused with StoreIncompatible."""
    result_of(open_sqlite(tmp_path, task.Clock()).close())
    with sqlite3.connect(tmp_path / DATABASE_NAME) as newer:
        newer.execute("PRAGMA user_version = 99")
    store = sqlite_store(tmp_path)
    with pytest.raises(StoreIncompatible, match="newer stompbroker"):
        store.open()


def test_a_store_without_the_expiry_index_gets_it_and_the_sweep_reads_it(tmp_path: Path) -> None:
    """
    A data directory made before paged queues' expiry sweep (schema 4 without
    ``messages_by_expiry``) gets the index when opened, with the rows it holds; the
    sweep's read then ranges over it instead of reading every message of the key.
    """
    with sqlite3.connect(tmp_path / DATABASE_NAME) as database:
        database.executescript(SCHEMA_1 + SCHEMA_2_ADDED + SCHEMA_3_ADDED + SCHEMA_4_ADDED)
        database.executemany(
            "INSERT INTO messages (sequence, queue, message_id, destination, headers, body,"
            " expires) VALUES (?, '/queue/a', ?, '/queue/a', '[]', x'', ?)",
            [(n, f"m-{n}", 10.0 * (n % 2)) for n in range(1, 7)],
        )
    clock = task.Clock()
    store = open_sqlite(tmp_path, clock)
    found = store.expired("/queue/a", 0, None, 20.0, 10)
    clock.advance(1)
    assert [record.message_id for record in result_of(found).records] == ["m-1", "m-3", "m-5"]
    result_of(store.close())
    with sqlite3.connect(tmp_path / DATABASE_NAME) as database:
        indexes = database.execute(
            "SELECT name FROM sqlite_schema WHERE type = 'index' AND tbl_name = 'messages'"
        ).fetchall()
        assert ("messages_by_expiry",) in indexes
        plan = database.execute(
            "EXPLAIN QUERY PLAN " + sqlite_records._EXPIRED, ("/queue/a", 20.0, 0, 10)
        ).fetchall()
        assert any("messages_by_expiry" in row[-1] for row in plan)
        # Messages that never expire are not in it.
        (entries,) = database.execute(
            "SELECT count(*) FROM messages INDEXED BY messages_by_expiry"
            " WHERE queue = '/queue/a' AND expires > 0"
        ).fetchone()
        assert entries == 3
