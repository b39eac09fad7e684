"""
Store writes that fail, as the broker's queues see them: an ACK is answered and
its consumer goes on, the log gets one line per episode, and a removal that
failed is made once writes succeed again.

The store's writes are made to fail by another connection holding the
database's write lock, with the store's wait for it (``busy_timeout``) at zero:
every group then fails at once, as on a disk that refuses everything.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from stompbroker.broker.service import Broker
from stompbroker.broker.store.sqlite import DATABASE_NAME
from tests.support.broker import Inbox
from tests.support.persistence import Setup, send
from tests.support.store import result_of


@pytest.fixture
def setup(tmp_path: Path) -> Setup:
    """An SQLite store, empty."""
    return Setup("sqlite", tmp_path / "data")


class WriteLock:
    """Another program holding the store's database locked for writing."""

    def __init__(self, setup: Setup) -> None:
        connection = setup.store._connection
        assert connection is not None
        connection.execute("PRAGMA busy_timeout = 0")
        self._other = sqlite3.connect(setup.data_dir / DATABASE_NAME, isolation_level=None)

    def take(self) -> None:
        self._other.execute("BEGIN IMMEDIATE")

    def release(self) -> None:
        self._other.execute("ROLLBACK")

    def close(self) -> None:
        self._other.close()


@pytest.fixture
def broker(setup: Setup) -> Iterator[Broker]:
    """A broker on the store."""
    yield setup.broker()


@pytest.fixture
def lock(setup: Setup, broker: Broker) -> Iterator[WriteLock]:
    """A write lock on the open store's database, not taken yet."""
    held = WriteLock(setup)
    yield held
    held.close()


def ack(broker: Broker, inbox: Inbox, index: int) -> Any:
    message = inbox.received[index]
    return broker.ack(inbox.connection, message.message_id, subscriber=inbox)


def failure_lines(log_events: list[dict[str, Any]]) -> list[str]:
    return [
        event["log_format"]
        for event in log_events
        if event.get("log_namespace") == "stompbroker.broker.store.journal"
    ]


def test_an_ack_whose_removal_fails_is_answered_and_the_consumer_goes_on(
    setup: Setup, broker: Broker, lock: WriteLock
) -> None:
    """A removal that cannot be written does not refuse the ACK: deliveries go on."""
    inbox = setup.subscribe(broker, prefetch=1)
    send(broker, "/queue/q", b"1", b"2")
    setup.settle()
    assert inbox.bodies() == [b"1"]
    lock.take()
    waiting = ack(broker, inbox, 0)
    setup.settle()
    assert result_of(waiting) is None
    lock.release()
    setup.settle()
    assert inbox.bodies() == [b"1", b"2"]


def test_failures_are_logged_once_per_episode_and_failed_removals_are_made_later(
    setup: Setup, broker: Broker, lock: WriteLock, log_events: list[dict[str, Any]]
) -> None:
    """
    Many failed writes give one line when the first fails and one when writes
    succeed again; the removals that failed are written then.
    """
    inbox = setup.subscribe(broker, prefetch=100)
    send(broker, "/queue/q", *[str(index).encode() for index in range(10)])
    setup.settle()
    lock.take()
    for index in range(9):
        ack(broker, inbox, index)
        setup.settle()
    lock.release()
    ack(broker, inbox, 9)
    setup.settle()
    setup.settle()
    lines = failure_lines(log_events)
    assert len(lines) == 2
    assert lines[0].startswith("message store could not {operation}")
    assert lines[1].startswith("message store writes succeed again")
    (ended,) = [event for event in log_events if "failed" in event]
    assert ended["failed"] == 9
    assert setup.stored_ids() == {}


def test_a_send_refused_during_an_episode_is_not_logged_again(
    setup: Setup, broker: Broker, lock: WriteLock, log_events: list[dict[str, Any]]
) -> None:
    """Publishers refused while the store fails add nothing to the log past the first line."""
    lock.take()
    refused = send(broker, "/queue/q", b"1", b"2", b"3")
    setup.settle()
    for waiting in refused:
        waiting.addErrback(lambda failure: None)
    assert len(failure_lines(log_events)) == 1
