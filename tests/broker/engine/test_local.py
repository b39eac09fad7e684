"""
Tests of the in-process engine through :class:`IEngine`: that it provides the interface,
and what each method does to topics, queues, durable subscriptions and the store.
"""

from __future__ import annotations

from typing import Any

import pytest
from twisted.internet.defer import Deferred
from twisted.internet.task import Clock
from zope.interface.verify import verifyObject

from stompbroker.broker.engine.engine_interface import IEngine, IQueue
from stompbroker.broker.engine.local import LocalEngine
from stompbroker.broker.queueing.delivery import DeliveryCounters, DeliveryPolicy
from stompbroker.broker.queueing.queues import WorkerQueue
from stompbroker.broker.store.base import StoreNotOpen
from stompbroker.broker.store.journal import durable_key
from stompbroker.broker.store.memory import MemoryStore
from stompbroker.protocol.errors import DuplicateSubscription, UnknownSubscription
from stompbroker.protocol.message import Message
from tests.support.broker import Inbox

NOW = 1_700_000_000.0


def local(store: Any = None, **policy: Any) -> LocalEngine:
    """A local engine on a clock at NOW; with a store, opened."""
    clock = Clock()
    clock.advance(NOW)
    engine = LocalEngine(clock, policy=DeliveryPolicy(**policy), store=store)
    engine.open()
    return engine


def message(destination: str, body: bytes = b"m", **fields: Any) -> Message:
    return Message(destination, body.decode(), (), body, **fields)


def test_the_local_engine_and_its_queues_provide_the_interfaces() -> None:
    """LocalEngine provides IEngine, and WorkerQueue (what it hands out) provides IQueue."""
    engine = local()
    assert verifyObject(IEngine, engine)
    assert verifyObject(IQueue, engine.queue("/queue/q"))
    assert verifyObject(
        IQueue, WorkerQueue("/q", Clock(), DeliveryPolicy(), DeliveryCounters(), print)
    )


def test_topic_fan_out_counts_once_per_send_and_delivers_to_each_match() -> None:
    """
    A topic SEND is counted in once; direct deliveries are counted at routing, queues count
    their own.
    """
    engine = local()
    direct = Inbox("/topic/a", "auto")
    engine.add_subscriber("/topic/a", direct)
    acking = Inbox("/topic/a", "client")
    engine.subscription_queue("/topic/a").add_consumer(acking, 10, 6)
    engine.publish_topic(message("/topic/a", b"abc"))
    assert direct.bodies() == acking.bodies() == [b"abc"]
    counted = engine.traffic.destinations["/topic/a"]
    assert (counted.messages_in, counted.bytes_in, counted.messages_delivered) == (1, 3, 2)
    assert counted.messages_acked == 1


def test_a_topic_message_that_has_expired_is_expired_not_delivered() -> None:
    """Expiry is checked at routing: nobody gets it, and it counts as expired."""
    engine = local(expired="dead-letter")
    inbox = Inbox("/topic/a", "auto")
    engine.add_subscriber("/topic/a", inbox)
    engine.publish_topic(message("/topic/a", expires=NOW))
    assert inbox.received == [] and engine.counters.expired == 1
    assert len(engine.queues["/queue/DLQ.a"].pending) == 1
    engine.remove_subscriber("/topic/a", inbox)
    assert len(engine.topics) == 0


def test_a_reply_to_a_requester_that_has_gone_is_dropped_and_counted() -> None:
    """A /reply-queue/ whose connection closed takes nothing: counted in and dropped."""
    engine = local()
    engine.publish_reply(message("/reply-queue/tmp-x-1"))
    counted = engine.traffic.destinations["/reply-queue/tmp-x-1"]
    assert (engine.counters.discarded, counted.messages_in, counted.messages_dropped) == (1, 1, 1)
    reply = engine.new_reply_queue()
    engine.publish_reply(message(reply.destination, b"r"))
    assert [m.body for m in reply.pending] == [b"r"]
    engine.delete_queue(reply)
    assert reply.destination not in engine.queues


def test_keep_files_under_the_queue_or_the_matching_durable_subscriptions() -> None:
    """
    A queue message is kept under its queue; a topic message under each durable it matches now.
    """
    store = MemoryStore()
    engine = local(store)
    engine.durable_queue(("c", "all"), "/topic/#")
    engine.durable_queue(("c", "other"), "/topic/b")
    engine.subscription_queue("/topic/a")
    engine.keep(message("/queue/q", persistent=True))
    engine.keep(message("/topic/a", b"t", persistent=True))
    assert engine.keep(message("/queue/q", b"old", persistent=True, expires=NOW)) is None
    state: list[Any] = []
    store.recover().addCallback(state.append)
    assert list(state[0].queues) == ["/queue/q"]
    assert [m.body for m in state[0].backlogs[durable_key(("c", "all"))]] == [b"t"]
    assert state[0].backlogs[durable_key(("c", "other"))] == ()


def test_an_idle_queue_is_released_but_not_a_reply_queue() -> None:
    """release_queue forgets an idle /queue/; a temporary queue ends only with its connection."""
    engine = local()
    queue = engine.queue("/queue/q")
    engine.release_queue(queue)
    assert "/queue/q" not in engine.queues
    reply = engine.new_reply_queue()
    engine.release_queue(reply)
    assert reply.destination in engine.queues


def test_depth_counts_what_waits_in_a_queue() -> None:
    """depth is the number of pending messages, 0 for a queue that does not exist."""
    engine = local()
    engine.publish_queue(message("/queue/q", b"1"))
    engine.publish_queue(message("/queue/q", b"2"))
    assert (engine.depth("/queue/q"), engine.depth("/queue/none")) == (2, 0)


def test_a_durable_name_on_another_pattern_starts_afresh_unless_consumed() -> None:
    """
    As JMS: a durable subscribed again elsewhere loses its backlog; while consumed it is
    refused.
    """
    engine = local()
    queue = engine.durable_queue(("c", "d"), "/topic/a")
    assert engine.durable_queue(("c", "d"), "/topic/a") is queue
    engine.publish_topic(message("/topic/a"))
    moved = engine.durable_queue(("c", "d"), "/topic/b")
    assert moved is not queue and not moved.pending and engine.topics.match("/topic/a") == ()
    moved.add_consumer(Inbox("/topic/b", "client"), 10, 6)
    with pytest.raises(DuplicateSubscription):
        engine.durable_queue(("c", "d"), "/topic/c")


def test_removing_a_durable_subscription_drops_it_from_the_store() -> None:
    """remove_durable deletes the queue and the store's record; an unknown one is an error."""
    store = MemoryStore()
    engine = local(store)
    engine.durable_queue(("c", "d"), "/topic/a")
    removed = engine.remove_durable(("c", "d"))
    assert isinstance(removed, Deferred)
    state: list[Any] = []
    store.recover().addCallback(state.append)
    assert state[0].subscriptions == () and engine.durable == {}
    with pytest.raises(UnknownSubscription):
        engine.remove_durable(("c", "d"))


def test_without_a_store_recovery_is_at_once_and_stop_waits_only_for_the_drain() -> None:
    """An engine with no store is ready at once, and stopped once the connections are drained."""
    engine = local()
    ready: list[Any] = []
    engine.recover().addCallback(ready.append)
    drained: Deferred[None] = Deferred()
    assert engine.stop(drained) is drained and ready == [None]


def test_stop_closes_the_store_after_the_drain() -> None:
    """The store is closed only once the connections are gone, their writes taken."""
    store = MemoryStore()
    engine = local(store)
    drained: Deferred[None] = Deferred()
    stopped: list[Any] = []
    engine.stop(drained).addCallback(stopped.append)
    assert engine.journal is not None and engine.journal.stopping
    engine.publish_queue(message("/queue/late"))
    assert stopped == []
    drained.callback(None)
    assert stopped == [None]
    with pytest.raises(StoreNotOpen):
        store.open()
