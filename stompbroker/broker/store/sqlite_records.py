"""
Rows in and out of the SQLite store: what its writer thread runs for each operation,
the reads of a paged queue's next messages, and the read at recovery (of
everything, or of each key's head and the size of the rest).

Each function takes the connection last, so that
:class:`~stompbroker.broker.store.sqlite.SQLiteStore` binds the rest with
``functools.partial`` in the reactor thread and its writer calls the result with
the connection, inside the transaction of a group.  They raise a
:class:`~stompbroker.broker.store.base.StoreError` only for a failure of their
own operation, which then wrote nothing; an ``sqlite3.Error`` fails the whole
group.  A message's headers are kept as a JSON list of pairs, which keeps their
order and repeats (the tables are :mod:`stompbroker.broker.store.sqlite_schema`).

A message's insert (:class:`PendingInsert`) and its delete (:class:`Removal`)
are objects with a ``write_run``
(:data:`~stompbroker.broker.store.sqlite_writer.RunWriter`): the writer hands it
each run of them that is consecutive in a group, and it writes the run as one
statement of up to :data:`MOST_ROWS` rows (``INSERT ... VALUES (...), (...)``,
``DELETE ... WHERE queue = ? AND message_id IN (...)``), in as few sizes of
statement as SQLite's statement cache can keep (powers of two).
"""

from __future__ import annotations

import functools
import json
import sqlite3
from collections.abc import Iterable, Iterator
from typing import Any

from attrs import define

from stompbroker.broker.features.duplicate_ids import duplicate_id_of
from stompbroker.broker.store.base import (
    DurableSubscription,
    ExpiredPage,
    PagedRange,
    RecoveredState,
    ScheduledRecord,
    StoredMessage,
    StoreError,
    duplicate_error,
)
from stompbroker.protocol.frames import Headers

__all__ = [
    "MOST_ROWS",
    "PendingInsert",
    "Removal",
    "decode_headers",
    "delete_after",
    "delete_message",
    "delete_retained",
    "delete_scheduled",
    "delete_transient",
    "delay_message",
    "encode_headers",
    "insert_message",
    "insert_transient",
    "mark_delivered",
    "move_message",
    "next_sequence",
    "read_all",
    "read_expired",
    "read_index",
    "read_page",
    "recover",
    "remove_subscription",
    "save_retained",
    "save_scheduled",
    "save_subscription",
]

_INSERT = (
    "INSERT OR IGNORE INTO messages (sequence, queue, message_id, destination, headers,"
    " body, expires) VALUES (?, ?, ?, ?, ?, ?, ?)"
)
_INSERT_DELIVERED = (
    "INSERT OR IGNORE INTO messages (sequence, queue, message_id, destination, headers,"
    " body, expires, delivered, redelivery_count) VALUES (?, ?, ?, ?, ?, ?, ?, 1, ?)"
)
_INSERT_TRANSIENT = (
    "INSERT OR IGNORE INTO messages (sequence, queue, message_id, destination, headers,"
    " body, expires, transient) VALUES (?, ?, ?, ?, ?, ?, ?, 1)"
)
#: A page of a key's transient messages, read back into memory; the partial
#: index ``messages_transient`` finds them without the persistent rows.
_DELETE_TRANSIENT = "DELETE FROM messages WHERE transient AND queue = ? AND sequence <= ?"
#: Every transient message, at a restart: one statement on that index.
_DROP_TRANSIENT = "DELETE FROM messages WHERE transient"
_HOLDS = "SELECT 1 FROM messages WHERE queue = ? AND message_id = ?"
_DELETE = "DELETE FROM messages WHERE queue = ? AND message_id = ?"
#: A message's duplicate-detection id; a durable subscription's copies share one.
_INSERT_DUPLICATE_ID = (
    "INSERT OR REPLACE INTO duplicate_ids (destination, duplicate_id) VALUES (?, ?)"
)
# SQLite evaluates every right-hand side with the row's old values.
_MARK_DELIVERED = (
    "UPDATE messages SET redelivery_count = redelivery_count + delivered, delivered = 1,"
    " due = 0 WHERE queue = ? AND message_id = ?"
)
_DELAY = "UPDATE messages SET due = ? WHERE queue = ? AND message_id = ?"
_UPSERT_SUBSCRIPTION = (
    "INSERT INTO subscriptions (name, destination, headers) VALUES (?, ?, ?)"
    " ON CONFLICT (name) DO UPDATE SET destination = excluded.destination,"
    " headers = excluded.headers"
)

_UPSERT_SCHEDULED = (
    "INSERT INTO scheduled (message_id, destination, headers, body, due, period, remaining,"
    " fired) VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (message_id) DO UPDATE SET"
    " due = excluded.due, period = excluded.period, remaining = excluded.remaining,"
    " fired = excluded.fired"
)
_REPLACE_RETAINED = (
    "INSERT OR REPLACE INTO retained (topic, message_id, destination, headers, body, expires)"
    " VALUES (?, ?, ?, ?, ?, ?)"
)


#: Encodes the headers' pairs as JSON lists (a tuple is written as a list), with
#: :func:`json.dumps`'s defaults and without its per-call set-up.
_encode_json = json.JSONEncoder().encode


def encode_headers(headers: Headers) -> str:
    """:returns: the headers as a JSON list of pairs, which keeps order and repeats."""
    return _encode_json(headers if type(headers) is tuple else tuple(headers))


def decode_headers(text: str) -> Headers:
    """:returns: the headers :func:`encode_headers` encoded."""
    return tuple((name, value) for name, value in json.loads(text))


def _row(record: StoredMessage) -> tuple[object, ...]:
    """:returns: the values :data:`_INSERT` files for a message."""
    return (
        record.sequence,
        record.queue,
        record.message_id,
        record.destination,
        encode_headers(record.headers),
        record.body,
        record.expires,
    )


def insert_message(record: StoredMessage, connection: sqlite3.Connection) -> StoredMessage:
    """
    :returns: ``record``, once inserted.
    :raises DuplicateMessage: if its key holds its id already; nothing is written.
    """
    cursor = connection.execute(_INSERT, _row(record))
    if cursor.rowcount == 0:
        raise duplicate_error(record.queue, record.message_id)
    keep_duplicate_id(record, connection)
    return record


def keep_duplicate_id(record: StoredMessage, connection: sqlite3.Connection) -> None:
    """
    In the transaction that files a message: keep its duplicate-detection id, so
    that a message receipted before a crash keeps it across the restart, even one
    consumed before it was written (the header scan runs in the writer thread).
    """
    duplicate_id = duplicate_id_of(record.headers)
    if duplicate_id is not None:
        connection.execute(_INSERT_DUPLICATE_ID, (record.destination, duplicate_id))


def insert_transient(record: StoredMessage, connection: sqlite3.Connection) -> None:
    """
    File a non-persistent message a paged queue keeps on disk, marked transient.

    No duplicate-detection id: those are kept for persistent messages only.
    An id its key holds already is left as it is (the message is already there).
    """
    connection.execute(_INSERT_TRANSIENT, _row(record))


def delete_transient(queue: str, through: int, connection: sqlite3.Connection) -> None:
    """Forget a key's transient messages up to sequence ``through`` (read back into memory)."""
    connection.execute(_DELETE_TRANSIENT, (queue, through))


@define
class PendingInsert:
    """
    A message's insert, which its delivery marks and its removal may still join
    while it waits for its group (in the reactor thread, before the writer takes
    the group; :class:`~stompbroker.broker.store.sqlite.SQLiteStore` says when).

    A group is one transaction, so an insert that carries its delivery marks
    (``delivered`` and ``redelivery_count`` set in the row it writes) leaves the
    database as the insert followed by the marks' updates would, and an insert
    dropped by its removal leaves it as the insert followed by the delete: the
    row is never written.  Nor need anyone wait for what joined: the message and
    its marks become durable together, or neither does, and a message removed
    before it was written cannot come back.  So a flowing queue's consumer gets
    a message without waiting for a commit, and a message acknowledged (or
    handed to an ``auto`` consumer) before its group was written costs no row
    write at all, as RabbitMQ's message store confirms a message consumed before
    it was written without writing it.  Its producer's RECEIPT still waits for
    the group's commit.

    :ivar record: the message, as :func:`insert_message` files it.
    :ivar marks: the delivery marks joined (see ``IMessageStore.mark_delivered``).
    :ivar dropped: whether its removal joined it.
    """

    record: StoredMessage
    marks: int = 0
    dropped: bool = False

    def __call__(self, connection: sqlite3.Connection) -> StoredMessage:
        """
        In the writer thread: write what the insert and what joined it leave.

        :returns: the record, as :func:`insert_message` does.
        :raises DuplicateMessage: as :func:`insert_message`, after the joined
            marks or removal are applied to the message its key holds already, as
            they would have been applied on their own.
        """
        record = self.record
        key = (record.queue, record.message_id)
        if self.dropped:
            if connection.execute(_HOLDS, key).fetchone() is None:
                keep_duplicate_id(record, connection)
                return record
            connection.execute(_DELETE, key)
            raise duplicate_error(*key)
        if not self.marks:
            return insert_message(record, connection)
        cursor = connection.execute(_INSERT_DELIVERED, (*_row(record), self.marks - 1))
        if cursor.rowcount == 0:
            for _ in range(self.marks):
                connection.execute(_MARK_DELIVERED, key)
            raise duplicate_error(*key)
        keep_duplicate_id(record, connection)
        return record

    @staticmethod
    def write_run(
        connection: sqlite3.Connection, inserts: list[PendingInsert]
    ) -> list[tuple[bool, Any]]:
        """Write a run of inserts together: :func:`write_inserts`."""
        return write_inserts(connection, inserts)


#: Most rows one statement of a run writes; a run's statements have
#: power-of-two sizes up to it (see :func:`_sizes`).
MOST_ROWS = 64
_INSERT_ROW = "(?, ?, ?, ?, ?, ?, ?, ?, ?)"


def _sizes(count: int) -> Iterator[int]:
    """:returns: the sizes of the statements that write ``count`` rows, largest first."""
    while count:
        size = min(MOST_ROWS, 1 << (count.bit_length() - 1))
        yield size
        count -= size


@functools.cache
def _insert_rows(count: int) -> str:
    """:returns: the insert of ``count`` messages with their delivery marks."""
    return (
        "INSERT OR IGNORE INTO messages (sequence, queue, message_id, destination, headers,"
        " body, expires, delivered, redelivery_count) VALUES " + ", ".join([_INSERT_ROW] * count)
    )


@functools.cache
def _delete_rows(count: int) -> str:
    """:returns: the delete of ``count`` messages of one key."""
    marks = ", ".join("?" * count)
    return f"DELETE FROM messages WHERE queue = ? AND message_id IN ({marks})"


def _one(apply: Any, connection: sqlite3.Connection) -> tuple[bool, Any]:
    """:returns: the outcome of one operation, as the writer records it."""
    try:
        return (True, apply(connection))
    except StoreError as error:
        return (False, error)


def write_inserts(
    connection: sqlite3.Connection, inserts: list[PendingInsert]
) -> list[tuple[bool, Any]]:
    """
    Write a run of inserts: those not dropped in multi-row statements, a dropped
    one (which writes nothing, or deletes a duplicate's row) on its own, in order.

    :returns: an outcome per insert, as :meth:`PendingInsert.__call__` gives it.
    """
    outcomes: list[tuple[bool, Any]] = []
    rows: list[PendingInsert] = []
    for insert in inserts:
        if insert.dropped:
            outcomes.extend(_insert_together(connection, rows))
            rows = []
            outcomes.append(_one(insert, connection))
        else:
            rows.append(insert)
    outcomes.extend(_insert_together(connection, rows))
    return outcomes


def _insert_together(
    connection: sqlite3.Connection, inserts: list[PendingInsert]
) -> list[tuple[bool, Any]]:
    """
    Insert messages (none dropped) in as few statements as :func:`_sizes` gives.

    Every sequence is new, so a row is missing only where its key held its id
    already (or an earlier row of the run took it): those few are found by their
    sequence afterwards, and answered as :meth:`PendingInsert.__call__` answers
    a duplicate.
    """
    if len(inserts) < 2:
        return [_one(insert, connection) for insert in inserts]
    values: list[object] = []
    for insert in inserts:
        marks = insert.marks
        values.extend(_row(insert.record))
        values.append(1 if marks else 0)
        values.append(marks - 1 if marks else 0)
    written = 0
    start = 0
    for size in _sizes(len(inserts)):
        end = start + size * 9
        written += connection.execute(_insert_rows(size), values[start:end]).rowcount
        start = end
    if written == len(inserts):
        for insert in inserts:
            keep_duplicate_id(insert.record, connection)
        return [(True, insert.record) for insert in inserts]
    return [_inserted_or_duplicate(insert, connection) for insert in inserts]


def _inserted_or_duplicate(
    insert: PendingInsert, connection: sqlite3.Connection
) -> tuple[bool, Any]:
    """After a run's insert that left some rows out: the outcome of one of its inserts."""
    record = insert.record
    found = connection.execute("SELECT 1 FROM messages WHERE sequence = ?", (record.sequence,))
    if found.fetchone() is not None:
        keep_duplicate_id(record, connection)
        return (True, record)
    key = (record.queue, record.message_id)
    for _ in range(insert.marks):
        connection.execute(_MARK_DELIVERED, key)
    return (False, duplicate_error(*key))


@define
class Removal:
    """
    A message's delete (:meth:`~stompbroker.broker.store.sqlite.SQLiteStore.remove`):
    the message, if its key holds it, is deleted.

    :ivar queue: its key.
    :ivar message_id: its id.
    """

    queue: str
    message_id: str

    def __call__(self, connection: sqlite3.Connection) -> None:
        """In the writer thread: :func:`delete_message`."""
        delete_message(self.queue, self.message_id, connection)

    @staticmethod
    def write_run(
        connection: sqlite3.Connection, removals: list[Removal]
    ) -> list[tuple[bool, Any]]:
        """Delete a run of messages, those of one key together (see :data:`RunWriter`)."""
        start = 0
        count = len(removals)
        while start < count:
            queue = removals[start].queue
            end = start + 1
            while end < count and removals[end].queue == queue:
                end += 1
            ids = [removal.message_id for removal in removals[start:end]]
            done = 0
            for size in _sizes(len(ids)):
                connection.execute(_delete_rows(size), (queue, *ids[done : done + size]))
                done += size
            start = end
        return [(True, None)] * count


def read_duplicate_ids(connection: sqlite3.Connection) -> list[tuple[str, str]]:
    """:returns: every kept ``(destination, duplicate-detection id)``, oldest first."""
    return connection.execute(
        "SELECT destination, duplicate_id FROM duplicate_ids ORDER BY rowid"
    ).fetchall()


def delete_duplicate_ids(
    destination: str, duplicate_ids: list[str], connection: sqlite3.Connection
) -> None:
    """Forget ids that left ``destination``'s window."""
    connection.executemany(
        "DELETE FROM duplicate_ids WHERE destination = ? AND duplicate_id = ?",
        [(destination, each) for each in duplicate_ids],
    )


def delete_message(queue: str, message_id: str, connection: sqlite3.Connection) -> None:
    """Delete a message, if its key holds it."""
    connection.execute(_DELETE, (queue, message_id))


def mark_delivered(queue: str, message_id: str, connection: sqlite3.Connection) -> None:
    """Record a delivery: a message delivered before counts one more redelivery."""
    connection.execute(_MARK_DELIVERED, (queue, message_id))


def delay_message(queue: str, message_id: str, due: float, connection: sqlite3.Connection) -> None:
    """Record when a NACKed message may be delivered again."""
    connection.execute(_DELAY, (due, queue, message_id))


def move_message(
    from_queue: str, message_id: str, record: StoredMessage, connection: sqlite3.Connection
) -> StoredMessage:
    """
    Add the dead-letter copy, then delete the original: one transaction holds both.

    :returns: ``record``, once stored.
    :raises DuplicateMessage: if ``record``'s key holds its id; nothing is written.
    """
    insert_message(record, connection)
    connection.execute(_DELETE, (from_queue, message_id))
    return record


def save_subscription(
    name: str, destination: str, encoded_headers: str, connection: sqlite3.Connection
) -> None:
    """
    Create a durable subscription, or replace the one of that name.

    :param encoded_headers: its headers, from :func:`encode_headers` called in the
        reactor thread: headers JSON cannot hold then fail that call at once, not
        the writer's whole group.
    """
    connection.execute(_UPSERT_SUBSCRIPTION, (name, destination, encoded_headers))


def remove_subscription(name: str, connection: sqlite3.Connection) -> None:
    """Delete a durable subscription and its backlog (one transaction holds both)."""
    connection.execute("DELETE FROM subscriptions WHERE name = ?", (name,))
    connection.execute("DELETE FROM messages WHERE queue = ?", (name,))


def save_scheduled(
    record: ScheduledRecord, encoded_headers: str, connection: sqlite3.Connection
) -> None:
    """
    Keep a scheduled message, or update its schedule (it keeps its place in the order).

    :param encoded_headers: its headers, from :func:`encode_headers`, as
        :func:`save_subscription` takes them.
    """
    connection.execute(
        _UPSERT_SCHEDULED,
        (
            record.message_id,
            record.destination,
            encoded_headers,
            record.body,
            record.due,
            record.period,
            record.remaining,
            record.fired,
        ),
    )


def delete_scheduled(message_id: str, connection: sqlite3.Connection) -> None:
    """Forget a scheduled message, if it is kept."""
    connection.execute("DELETE FROM scheduled WHERE message_id = ?", (message_id,))


def save_retained(
    topic: str, record: StoredMessage, encoded_headers: str, connection: sqlite3.Connection
) -> None:
    """Keep a topic's retained message, replacing the one before (it moves to the end)."""
    connection.execute(
        _REPLACE_RETAINED,
        (
            topic,
            record.message_id,
            record.destination,
            encoded_headers,
            record.body,
            record.expires,
        ),
    )


def delete_retained(topic: str, connection: sqlite3.Connection) -> None:
    """Forget a topic's retained message, if it has one."""
    connection.execute("DELETE FROM retained WHERE topic = ?", (topic,))


def next_sequence(connection: sqlite3.Connection) -> int:
    """:returns: the sequence number the next message stored gets."""
    (last,) = connection.execute("SELECT max(sequence) FROM messages").fetchone()
    return (last or 0) + 1


_COLUMNS = (
    "sequence, queue, message_id, destination, headers, body, expires,"
    " delivered, redelivery_count, due, transient"
)
_PAGE = (
    f"SELECT {_COLUMNS} FROM messages WHERE queue = ? AND sequence > coalesce("
    "(SELECT sequence - 1 FROM messages WHERE queue = ? AND message_id = ?), ?)"
    " ORDER BY sequence LIMIT ?"
)
_DELETE_AFTER = (
    "DELETE FROM messages WHERE queue = ? AND sequence > coalesce("
    "(SELECT sequence - 1 FROM messages WHERE queue = ? AND message_id = ?), ?)"
)


def _record(row: tuple[Any, ...]) -> StoredMessage:
    """:returns: the message a row of :data:`_COLUMNS` holds."""
    (
        sequence,
        queue,
        message_id,
        destination,
        headers,
        body,
        expires,
        delivered,
        redelivery_count,
        due,
        transient,
    ) = row
    return StoredMessage(
        queue=queue,
        sequence=sequence,
        message_id=message_id,
        destination=destination,
        headers=decode_headers(headers),
        body=body,
        expires=expires,
        delivered=bool(delivered),
        redelivery_count=redelivery_count,
        due=due,
        transient=bool(transient),
    )


def read_page(
    queue: str, after: int, first_id: str | None, limit: int, connection: sqlite3.Connection
) -> list[StoredMessage]:
    """
    :returns: up to ``limit`` messages of a key past ``after`` (or from
        ``first_id`` on, if the key holds it), in sequence order: a range of the
        ``(queue, sequence)`` index.
    """
    rows = connection.execute(_PAGE, (queue, queue, first_id, after, limit))
    return [_record(row) for row in rows]


_START = (
    "SELECT coalesce((SELECT sequence - 1 FROM messages WHERE queue = ? AND message_id = ?), ?)"
)
# The sequences from the partial index messages_by_expiry alone (``expires > 0``
# spelt out: it holds those rows only), then those rows: by ``(queue, sequence)``
# SQLite would read every row of the key (and a large body's pages) to find the
# few that expire.
_EXPIRED = (
    f"SELECT {_COLUMNS} FROM messages WHERE sequence IN (SELECT sequence FROM messages"
    " INDEXED BY messages_by_expiry WHERE queue = ? AND expires > 0 AND expires <= ?"
    " AND sequence > ? ORDER BY sequence LIMIT ?) ORDER BY sequence"
)
_NEXT_EXPIRY = (
    "SELECT min(expires) FROM messages WHERE queue = ? AND expires > 0 AND expires > ?"
    " AND sequence > ?"
)


def read_expired(
    queue: str,
    after: int,
    first_id: str | None,
    now: float,
    limit: int,
    connection: sqlite3.Connection,
) -> ExpiredPage:
    """
    :returns: the oldest ``limit`` messages of a key past where :func:`read_page`
        reads that have expired by ``now``, and the next expiry there: ranges of
        the ``(queue, expires)`` index, whatever the messages that never expire.
    """
    ((start,),) = connection.execute(_START, (queue, first_id, after)).fetchall()
    rows = connection.execute(_EXPIRED, (queue, now, start, limit))
    records = tuple(_record(row) for row in rows)
    ((soonest,),) = connection.execute(_NEXT_EXPIRY, (queue, now, start)).fetchall()
    return ExpiredPage(start, records, soonest or 0.0)


def delete_after(
    queue: str, after: int, first_id: str | None, connection: sqlite3.Connection
) -> None:
    """Delete every message of a key from where :func:`read_page` reads on."""
    connection.execute(_DELETE_AFTER, (queue, queue, first_id, after))


def recover(read_ahead: int, connection: sqlite3.Connection) -> RecoveredState:
    """
    Drop every transient message (a non-persistent message does not survive a
    restart: one statement, on the index of transient rows, that reads none of
    them), then read the rest back.

    :param read_ahead: see :func:`read_index`; 0 reads every message (:func:`read_all`).
    """
    connection.execute(_DROP_TRANSIENT)
    if read_ahead:
        return read_index(read_ahead, connection)
    return read_all(connection)


def read_index(read_ahead: int, connection: sqlite3.Connection) -> RecoveredState:
    """
    Recovery that reads each key's head only: its first ``read_ahead`` messages,
    and how many follow (from the ``(queue, sequence)`` index, without reading
    their rows), with their bytes estimated from the head's.

    :returns: the state, with :attr:`RecoveredState.paged` for the keys that hold more.
    """
    keys = connection.execute(
        "SELECT queue, count(*), min(sequence) FROM messages GROUP BY queue ORDER BY 3"
    ).fetchall()
    heads: list[StoredMessage] = []
    paged: dict[str, PagedRange] = {}
    for key, count, _ in keys:
        head = read_page(key, 0, None, read_ahead, connection)
        heads.extend(head)
        if count > len(head):
            rest = count - len(head)
            mean = sum(len(record.body) for record in head) // len(head)
            paged[key] = PagedRange(rest, rest * mean, head[-1].sequence)
    # Keys in the order of their oldest message, each key's head in order.
    return _rest_of_state(heads, connection, paged)


def read_all(connection: sqlite3.Connection) -> RecoveredState:
    """:returns: every message in sequence order and every subscription in creation order."""
    messages = (
        _record(row)
        for row in connection.execute(f"SELECT {_COLUMNS} FROM messages ORDER BY sequence")
    )
    return _rest_of_state(messages, connection, {})


def _rest_of_state(
    messages: Iterable[StoredMessage],
    connection: sqlite3.Connection,
    paged: dict[str, PagedRange],
) -> RecoveredState:
    """:returns: the state of ``messages`` and what else the store holds."""
    subscriptions = (
        DurableSubscription(name, destination, decode_headers(headers))
        for name, destination, headers in connection.execute(
            "SELECT name, destination, headers FROM subscriptions ORDER BY rowid"
        )
    )
    scheduled = [
        ScheduledRecord(
            message_id, destination, decode_headers(headers), body, due, period, remaining, fired
        )
        for message_id, destination, headers, body, due, period, remaining, fired in (
            connection.execute(
                "SELECT message_id, destination, headers, body, due, period, remaining, fired"
                " FROM scheduled ORDER BY rowid"
            )
        )
    ]
    retained = [
        StoredMessage(
            topic, sequence, message_id, destination, decode_headers(headers), body, expires
        )
        for sequence, (topic, message_id, destination, headers, body, expires) in enumerate(
            connection.execute(
                "SELECT topic, message_id, destination, headers, body, expires FROM retained"
                " ORDER BY rowid"
            ),
            start=1,
        )
    ]
    return RecoveredState.from_records(
        messages, list(subscriptions), scheduled, retained, paged=paged
    )
