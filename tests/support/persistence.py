"""
A broker on a message store of each kind (memory, and SQLite with a synchronous
writer on a ``task.Clock``), for the tests of persistence and of what operators
do to persistent messages.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from twisted.internet.task import Clock

from stompbroker.broker.service import Broker
from stompbroker.broker.store.base import RecoveredState
from stompbroker.broker.store.memory import MemoryStore
from tests.support.broker import FakeConnection, Inbox
from tests.support.store import result_of, sqlite_store

EPOCH = 1_700_000_000.0
PERSISTENT = (("persistent", "true"),)


class Setup:
    """
    One kind of store, and brokers on it.

    :ivar store: the store the next broker uses.
    """

    def __init__(self, kind: str, data_dir: Path) -> None:
        self.kind = kind
        self.data_dir = data_dir
        self.clock = Clock()
        self.clock.advance(EPOCH)
        self.store = self._new_store()
        self.connections = 0

    def _new_store(self) -> Any:
        if self.kind == "memory":
            return MemoryStore()
        return sqlite_store(self.data_dir, self.clock, sync="always")

    def broker(self, **options: Any) -> Broker:
        """:returns: a started broker on the store, recovered."""
        broker = Broker(self.clock, store=self.store, **options)
        broker.startService()
        self.settle()
        result_of(broker.when_ready())
        return broker

    def restart(self, down: float = 0.0, **options: Any) -> Broker:
        """
        :param down: seconds between the crash and the new start.
        :returns: a new broker on what the store holds; the old one is dropped
            as a crash would drop it (what the store has committed stays), and
            with it the clock its timers were on.
        """
        self.settle()
        later = Clock()
        later.advance(self.clock.seconds() + down)
        self.clock = later
        if self.kind == "sqlite":
            result_of(self.store.close())
            self.store = self._new_store()
        return self.broker(**options)

    def settle(self) -> None:
        """Let the store commit what is pending."""
        self.clock.advance(0)

    def stored(self) -> RecoveredState:
        """:returns: what the store holds now."""
        recovering = self.store.recover()
        self.settle()
        state: RecoveredState = result_of(recovering)
        return state

    def stored_ids(self) -> dict[str, list[str]]:
        """:returns: each key's stored message ids, in order."""
        state = self.stored()
        found = {key: [m.message_id for m in messages] for key, messages in state.queues.items()}
        found.update(
            {key: [m.message_id for m in messages] for key, messages in state.backlogs.items()}
        )
        return found

    def subscribe(self, broker: Broker, destination: str = "/queue/q", **options: Any) -> Inbox:
        """:returns: a new subscriber on a connection of its own."""
        self.connections += 1
        connection = FakeConnection(f"c{self.connections}")
        broker.open_connection(connection)
        options.setdefault("ack_mode", "client-individual")
        inbox = Inbox(destination, connection=connection, **options)
        broker.subscribe(inbox)
        return inbox


@pytest.fixture(params=["memory", "sqlite"])
def setup(request: pytest.FixtureRequest, tmp_path: Path) -> Setup:
    """A store of each kind, empty."""
    return Setup(request.param, tmp_path / "data")


def send(broker: Broker, destination: str, *bodies: bytes, headers: Any = PERSISTENT) -> list[Any]:
    """:returns: what each SEND returned."""
    return [broker.send(destination, tuple(headers), body) for body in bodies]
