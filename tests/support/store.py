"""
The message store in tests: messages as a queue hands them over, a writer that
runs in the caller's thread, the result of a fired Deferred, a store read back
from disk, and the damage a test does to a store's file.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from attrs import frozen
from twisted.internet import task
from twisted.internet.defer import Deferred, maybeDeferred
from twisted.python.failure import Failure

from stompbroker.broker.store.base import RecoveredState
from stompbroker.broker.store.sqlite import DATABASE_NAME, SQLiteStore
from stompbroker.protocol.frames import Headers

#: What :func:`write_garbage` puts where the database belongs.
GARBAGE = b"this is not a database\n" * 200
#: Message bodies (count, bytes each) that fill a store well past the pages
#: :func:`damage_pages` overwrites.
FILLING = (200, 500)


@frozen
class Sent:
    """A message as a queue would hand it to the store: the fields of ``Message``."""

    destination: str
    message_id: str
    headers: Headers = ()
    body: bytes = b""
    expires: float = 0.0


def sent(message_id: str, destination: str = "/queue/orders", **fields: Any) -> Sent:
    """:returns: a message with a body that names it."""
    fields.setdefault("body", message_id.encode())
    return Sent(destination, message_id, **fields)


def run_now(work: Any) -> Deferred:
    """An executor for :class:`SQLiteStore` that runs the writer's work in the caller's thread."""
    return maybeDeferred(work)


def result_of(deferred: Deferred) -> Any:
    """
    :returns: what a fired Deferred fired with.
    :raises: the exception it failed with.
    """
    outcome: list[Any] = []
    deferred.addBoth(outcome.append)
    assert outcome, "the Deferred has not fired"
    if isinstance(outcome[0], Failure):
        outcome[0].raiseException()
    return outcome[0]


def sqlite_store(data_dir: Path, clock: Any = None, **options: Any) -> SQLiteStore:
    """
    :param clock: its reactor; a fresh ``task.Clock`` by default.
    :param options: more of :class:`SQLiteStore`'s options (``sync``, ``batch_delay``).
    :returns: an SQLite store on ``data_dir``, not opened yet, whose writer runs synchronously.
    """
    clock = task.Clock() if clock is None else clock
    return SQLiteStore(data_dir, reactor=clock, executor=run_now, **options)


def open_sqlite(
    data_dir: Path, clock: task.Clock, sync: str = "batch", **options: Any
) -> SQLiteStore:
    """:returns: an open SQLite store on ``data_dir`` whose writer runs synchronously."""
    store = sqlite_store(data_dir, clock, sync=sync, **options)
    store.open()
    return store


def recover_from(data_dir: Path) -> RecoveredState:
    """:returns: what a fresh store on ``data_dir`` recovers; it is closed again."""
    clock = task.Clock()
    store = open_sqlite(data_dir, clock)
    recovering = store.recover()
    clock.advance(1)
    state = result_of(recovering)
    result_of(store.close())
    return state


def ids_by_queue(state: RecoveredState) -> dict[str, list[str]]:
    """:returns: each recovered queue's message ids, in order."""
    return {queue: [m.message_id for m in found] for queue, found in state.queues.items()}


def write_garbage(data_dir: Path) -> None:
    """Put :data:`GARBAGE`, a file that is not SQLite at all, where the store's database goes."""
    data_dir.mkdir(parents=True, exist_ok=True)
    (data_dir / DATABASE_NAME).write_bytes(GARBAGE)


def damage_pages(data_dir: Path) -> None:
    """
    Overwrite two pages in the middle of a closed store's database, where its
    messages are (once it holds :data:`FILLING`), but not its header or schema:
    the store opens, and the damage shows only while it is read back.
    """
    with open(data_dir / DATABASE_NAME, "r+b") as database:
        database.seek(3 * 4096)
        database.write(b"\xff" * 8192)
