"""
Tests of the connection registry on its own: limits, session ids, per-connection state,
temporary queues, the socket's pace, and shutting down, on a ``task.Clock``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from twisted.internet.task import Clock

from stompbroker.broker.clients.connections import ConnectionRegistry, host_of
from stompbroker.broker.engine.local import LocalEngine
from stompbroker.broker.flow.broker_limits import Limits
from stompbroker.protocol.errors import InvalidDestination, LimitExceeded, ShuttingDown
from stompbroker.protocol.message import Message
from tests.support.broker import FakeConnection, Inbox


class Peer(FakeConnection):
    """A connection from a given address, that closes when told to shut down, if willing."""

    def __init__(self, session_id: str, peer: str = "10.0.0.1:1", willing: bool = True) -> None:
        super().__init__(session_id)
        self.peer = peer
        self.willing = willing
        self.told = False

    def shut_down(self, on_closed: Callable[[Any], None]) -> None:
        self.told = True
        if self.willing:
            on_closed(self)


def registry(**limits: Any) -> tuple[ConnectionRegistry, LocalEngine]:
    """A registry over a local engine, within ``limits``."""
    engine = LocalEngine(Clock())
    return ConnectionRegistry(Limits(**limits), engine.traffic, engine.ids, engine), engine


def test_host_of_takes_the_address_without_the_port() -> None:
    """The per-address limit counts hosts: IPv4, IPv6 and a peer without a port."""
    assert [host_of(Peer("c", peer)) for peer in ("10.0.0.1:5", "::1:5", "unix")] == [
        "10.0.0.1",
        "::1",
        "unix",
    ]


def test_total_and_per_address_limits_are_enforced_and_freed_on_close() -> None:
    """max_connections and max_connections_per_address refuse the next one until one closes."""
    connections, engine = registry(max_connections=3, max_connections_per_address=2)
    first, second = Peer("a"), Peer("b")
    connections.open(first)
    connections.open(second)
    with pytest.raises(LimitExceeded, match="from this address"):
        connections.open(Peer("c"))
    connections.open(Peer("d", "10.0.0.2:1"))
    with pytest.raises(LimitExceeded, match="too many connections"):
        connections.open(Peer("e", "10.0.0.3:1"))
    connections.close(first)
    connections.open(Peer("f"))
    assert (engine.traffic.connections_opened, engine.traffic.connections_closed) == (4, 1)


def test_no_limit_means_zero() -> None:
    """A limit of 0 admits any number of connections."""
    connections, _ = registry(max_connections=0, max_connections_per_address=0)
    for number in range(50):
        connections.open(Peer(str(number)))
    assert len(connections.connections) == 50


def test_a_stopping_registry_admits_nobody() -> None:
    """Once shutting down, open raises ShuttingDown."""
    connections, _ = registry()
    connections.stopping = True
    with pytest.raises(ShuttingDown):
        connections.open(Peer("a"))


def test_session_ids_are_unique_and_name_the_node() -> None:
    """Each session id is new and carries the broker's node token."""
    connections, engine = registry()
    ids = {connections.new_session_id() for _ in range(100)}
    assert len(ids) == 100
    assert all(session.startswith(f"session-{engine.ids.node}-") for session in ids)


def test_state_outlives_close_until_forget_which_deletes_temporary_queues() -> None:
    """
    close keeps the state for the broker to undo subscriptions; forget drops it and temp queues.
    """
    connections, engine = registry()
    owner = Peer("a")
    connections.open(owner)
    queue = connections.temp_queue(owner, "/temp-queue/replies")
    assert connections.temp_queue(owner, "/temp-queue/replies") is queue
    assert engine.queues[queue.destination] is queue
    assert connections.close(owner) is connections.states[owner]
    connections.forget(owner)
    assert owner not in connections.states and queue.destination not in engine.queues
    connections.forget(owner)


def test_a_temporary_queue_needs_a_connection_and_a_valid_name() -> None:
    """Python code has no temporary queues; a wildcard in the name is invalid."""
    connections, _ = registry()
    with pytest.raises(InvalidDestination, match="without a connection"):
        connections.temp_queue(None, "/temp-queue/a")
    with pytest.raises(InvalidDestination):
        connections.temp_queue(Peer("a"), "/temp-queue/a.*")


def test_paused_consumers_get_nothing_until_resumed() -> None:
    """pause_consumers holds a connection's queue messages in the queue; resume delivers them."""
    connections, engine = registry()
    owner = Peer("a")
    connections.open(owner)
    inbox = Inbox("/queue/q", connection=owner)
    queue = engine.queue("/queue/q")
    connections.state(owner).consumers[inbox] = queue.add_consumer(inbox, 10, 6)
    connections.pause_consumers(owner)
    engine.publish_queue(Message("/queue/q", "m1", (), b"m1"))
    assert inbox.received == [] and len(queue.pending) == 1
    connections.resume_consumers(owner)
    assert inbox.bodies() == [b"m1"]
    connections.pause_consumers(Peer("unknown"))
    connections.resume_consumers(Peer("unknown"))


def test_shut_down_tells_everyone_and_fires_when_all_have_closed() -> None:
    """shut_down tells each connection and fires once the last one has closed."""
    connections, _ = registry()
    clock = Clock()
    peers = [Peer("a"), Peer("b", "10.0.0.2:1")]
    for peer in peers:
        connections.open(peer)
    done: list[Any] = []
    connections.shut_down(clock).addCallback(done.append)
    assert all(peer.told for peer in peers) and done == [None]
    assert connections.stopping and not clock.getDelayedCalls()


def test_shut_down_gives_up_on_stragglers_after_the_timeout() -> None:
    """A connection that does not close holds the shut-down only for shutdown_timeout seconds."""
    connections, _ = registry(shutdown_timeout=5.0)
    clock = Clock()
    connections.open(Peer("stuck", willing=False))
    done: list[Any] = []
    connections.shut_down(clock).addCallback(done.append)
    clock.advance(4.9)
    assert done == []
    clock.advance(0.1)
    assert done == [None]


def test_shut_down_with_nobody_connected_fires_at_once() -> None:
    """Nothing to wait for: the Deferred has fired already."""
    connections, _ = registry()
    done: list[Any] = []
    connections.shut_down(Clock()).addCallback(done.append)
    assert done == [None]


def test_the_low_memory_mark_defaults_to_a_share_of_the_high_one() -> None:
    """Limits.memory_low_mark is memory_low when set, else 80% of memory_high."""
    assert Limits(memory_high=1000).memory_low_mark == 800
    assert Limits(memory_high=1000, memory_low=300).memory_low_mark == 300
