"""
``twistd stompbroker``'s persistence options (``--data-dir``, ``--sync``,
``--persistent-queues``) and the :class:`~stompbroker.app.services.BrokerService` that lets
clients in only once the broker has recovered, on a MemoryReactorClock.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from twisted.application.service import Service
from twisted.internet.defer import Deferred, fail, maybeDeferred
from twisted.internet.testing import MemoryReactorClock
from twisted.python import usage
from twisted.python.failure import Failure

from stompbroker.app.options import Options
from stompbroker.app.services import BrokerService
from stompbroker.app.tap import makeService
from stompbroker.broker.service import Broker
from stompbroker.broker.store.base import StoreDamaged
from stompbroker.broker.store.memory import MemoryStore
from stompbroker.broker.store.sqlite import SQLiteStore
from tests.support.options import parse
from tests.support.store import result_of, run_now, sqlite_store


def options(*argv: str) -> Options:
    return parse(*argv, "--http", "none")


def test_defaults_keep_persistent_messages_in_stompbroker_data_with_batch_sync(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """
    By default the store is SQLite in ./stompbroker-data, sync batch, and nothing is made before
    start.
    """
    monkeypatch.chdir(tmp_path)
    broker = makeService(options()).getServiceNamed("broker")
    assert isinstance(broker.engine.store, SQLiteStore)
    store = broker.engine.store
    assert (store.data_dir, store.sync) == (tmp_path / "stompbroker-data", "batch")
    assert not broker.persistent_queues
    assert list(tmp_path.iterdir()) == []


def test_persistence_options_reach_the_store_and_broker(tmp_path: Path) -> None:
    """
    --data-dir, --sync and --persistent-queues set the store's place and mode and the broker's
    policy.
    """
    parsed = options("--data-dir", str(tmp_path / "d"), "--sync", "always", "--persistent-queues")
    broker = makeService(parsed, reactor=MemoryReactorClock()).getServiceNamed("broker")
    assert (broker.engine.store.data_dir, broker.engine.store.sync) == (tmp_path / "d", "always")
    assert broker.persistent_queues
    # twistd stops the broker, which closes the store after shutting its clients down.
    assert not broker.engine.store.close_at_shutdown


def test_data_dir_none_keeps_everything_in_memory() -> None:
    """--data-dir none runs the broker without a store."""
    broker = makeService(options("--data-dir", "none")).getServiceNamed("broker")
    assert (broker.engine.store, broker.engine.journal) == (None, None)


@pytest.mark.parametrize(
    "argv",
    [
        ["--sync", "sometimes"],
        ["--data-dir", ""],
        ["--data-dir", "none", "--persistent-queues"],
    ],
)
def test_bad_persistence_options_are_usage_errors(argv: list[str]) -> None:
    """Values the store cannot use are refused while parsing, with a usage error."""
    with pytest.raises(usage.UsageError):
        options(*argv)


class Recorder(Service):
    """A child service that records what was asked of it, standing in for a listener."""

    def __init__(self) -> None:
        self.privileged = False

    def privilegedStartService(self) -> None:
        self.privileged = True


class UnreadableStore(MemoryStore):
    """A store that opens, but whose contents cannot be read back."""

    def recover(self, read_ahead: int = 0) -> Deferred[Any]:
        return fail(StoreDamaged("the store cannot be read"))


class StepExecutor:
    """A store writer that runs its work only when the test says."""

    def __init__(self) -> None:
        self.waiting: list[tuple[Any, Deferred[Any]]] = []

    def __call__(self, work: Any) -> Deferred[Any]:
        done: Deferred[Any] = Deferred()
        self.waiting.append((work, done))
        return done

    def run_all(self) -> None:
        while self.waiting:
            work, done = self.waiting.pop(0)
            maybeDeferred(work).chainDeferred(done)


def broker_service(
    tmp_path: Path, executor: Any, store: Any = None
) -> tuple[BrokerService, Recorder, MemoryReactorClock, list[Failure]]:
    reactor = MemoryReactorClock()
    if store is None:
        store = SQLiteStore(tmp_path, reactor=reactor, executor=executor)
    broker = Broker(reactor, store=store)
    failures: list[Failure] = []
    top = BrokerService(broker, failures.append)
    listener = Recorder()
    listener.setServiceParent(top)
    return top, listener, reactor, failures


def test_listeners_start_only_once_the_broker_has_recovered(tmp_path: Path) -> None:
    """No client can connect to a half-rebuilt broker: listeners start after recovery."""
    writer = StepExecutor()
    top, listener, reactor, failures = broker_service(tmp_path, writer)
    top.privilegedStartService()
    top.startService()
    assert top.broker.running
    assert not listener.running and not listener.privileged
    reactor.advance(0)
    writer.run_all()
    assert listener.running
    assert failures == []
    stopping = top.stopService()
    reactor.advance(0)
    writer.run_all()
    result_of(stopping)
    assert not listener.running and not top.broker.running


def test_a_failed_recovery_is_reported_and_starts_no_listener(tmp_path: Path) -> None:
    """
    When the store cannot be read back, on_failure hears of it and no listener starts; stopping
    still works.
    """
    top, listener, reactor, failures = broker_service(tmp_path, None, UnreadableStore())
    top.startService()
    [failure] = failures
    assert failure.check(StoreDamaged)
    assert not listener.running
    result_of(top.stopService())


def test_a_locked_data_directory_stops_twistd_with_its_message(tmp_path: Path) -> None:
    """
    A data directory another broker holds ends the start with SystemExit and the store's advice.
    """
    holder = sqlite_store(tmp_path, MemoryReactorClock())
    holder.open()
    try:
        top, listener, _, failures = broker_service(tmp_path, run_now)
        with pytest.raises(SystemExit, match="in use by another broker"):
            top.startService()
        assert not listener.running and failures == []
    finally:
        result_of(holder.close())
