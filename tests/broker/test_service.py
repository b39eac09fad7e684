"""Tests of :class:`Broker` as the service over its parts: the engine it uses, and what it binds."""

from __future__ import annotations

import pytest
from twisted.internet.task import Clock
from zope.interface.verify import verifyObject

from stompbroker.broker.engine.local import LocalEngine
from stompbroker.broker.flow.broker_limits import Limits
from stompbroker.broker.service import Broker
from stompbroker.broker.store.memory import MemoryStore
from stompbroker.interfaces import IBroker
from tests.support.broker import FakeConnection, Inbox


def test_the_broker_provides_ibroker_with_its_hot_methods_bound_once() -> None:
    """verifyObject passes, and send and ack are the router's and the consumers' own methods."""
    broker = Broker(Clock(), limits=Limits(memory_high=0))
    assert verifyObject(IBroker, broker)
    assert broker.send == broker.router.send and broker.ack == broker.consumers.ack


def test_by_default_the_engine_is_local_on_the_brokers_store() -> None:
    """
    Broker(clock, store=...) builds a LocalEngine that keeps persistent messages in that store.
    """
    store = MemoryStore()
    broker = Broker(Clock(), store=store, persistent_queues=True)
    assert isinstance(broker.engine, LocalEngine)
    assert broker.engine.store is store and broker.engine.journal is broker.engine.journal
    assert broker.persistent_queues and broker.engine.queues is broker.engine.queues


def test_a_given_engine_is_used_and_brings_its_own_store() -> None:
    """engine= replaces the default; a store beside it is refused, as the engine has its own."""
    engine = LocalEngine(Clock())
    broker = Broker(Clock(), engine=engine)
    inbox = Inbox("/topic/a", "auto")
    broker.open_connection(inbox.connection)
    broker.subscribe(inbox)
    broker.publish("/topic/a", "hello")
    assert engine.topics.match("/topic/a") == (inbox,) and inbox.bodies() == [b"hello"]
    with pytest.raises(ValueError, match="own store"):
        Broker(Clock(), engine=LocalEngine(Clock()), store=MemoryStore())


def test_closing_a_connection_undoes_its_subscriptions_and_temporary_queues() -> None:
    """close_connection returns what its consumers held and deletes its temporary queues."""
    broker = Broker(Clock(), limits=Limits(memory_high=0))
    owner, other = FakeConnection("owner"), FakeConnection("other")
    broker.open_connection(owner)
    broker.open_connection(other)
    holding = Inbox("/queue/q", connection=owner)
    broker.subscribe(holding)
    broker.subscribe(Inbox("/temp-queue/mine", connection=owner, subscription_id="t"))
    broker.send("/queue/q", (), b"1")
    broker.close_connection(owner)
    assert [m.redeliveries for m in broker.engine.queues["/queue/q"].pending] == [1]
    assert [d for d in broker.engine.queues if d.startswith("/reply-queue/")] == []
    assert owner not in broker.connections and owner not in broker.registry.states
