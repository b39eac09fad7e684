"""
Tests of recovery on its own: :func:`rebuild` from a given store state into a local
engine, and :class:`Readiness` for those who wait.
"""

from __future__ import annotations

from typing import Any

import pytest
from twisted.internet.task import Clock
from twisted.python.failure import Failure

from stompbroker.broker.engine.local import LocalEngine
from stompbroker.broker.queueing.delivery import DeliveryPolicy
from stompbroker.broker.store.base import (
    DurableSubscription,
    RecoveredState,
    StoreDamaged,
    StoredMessage,
)
from stompbroker.broker.store.journal import durable_key
from stompbroker.broker.store.memory import MemoryStore
from stompbroker.broker.store.recovery import Readiness, rebuild

NOW = 1_700_000_000.0


def stored(key: str, sequence: int, destination: str, **fields: Any) -> StoredMessage:
    return StoredMessage(key, sequence, f"m{sequence}", destination, (), b"%d" % sequence, **fields)


def engine(expired: str = "drop") -> LocalEngine:
    """
    A local engine on a clock at NOW, with a store so that its queues keep persistent messages.
    """
    clock = Clock()
    clock.advance(NOW)
    store = MemoryStore()
    store.open()
    return LocalEngine(clock, policy=DeliveryPolicy(expired=expired), store=store)


def test_queues_come_back_in_order_with_their_delivery_counts() -> None:
    """Each /queue/ gets its messages back in order; one delivered before says so next time."""
    rebuilt = engine()
    state = RecoveredState.from_records(
        [
            stored("/queue/a", 1, "/queue/a"),
            stored("/queue/b", 2, "/queue/b", delivered=True),
            stored("/queue/a", 3, "/queue/a", redelivery_count=2, delivered=True),
        ],
        [],
    )
    rebuild(rebuilt, state)
    assert [(m.body, m.redeliveries, m.persistent) for m in rebuilt.queues["/queue/a"].pending] == [
        (b"1", 0, True),
        (b"3", 3, True),
    ]
    assert rebuilt.queues["/queue/b"].pending[0].redeliveries == 1


def test_durable_subscriptions_come_back_in_the_tree_with_their_backlogs() -> None:
    """A durable subscription's queue is in the tree again, collecting, with what it held."""
    rebuilt = engine()
    key = durable_key(("client", "news"))
    state = RecoveredState.from_records(
        [stored(key, 1, "/topic/news.eu")], [DurableSubscription(key, "/topic/news.*")]
    )
    rebuild(rebuilt, state)
    queue = rebuilt.durable[("client", "news")]
    assert rebuilt.topics.match("/topic/news.us") == (queue,)
    assert queue.store_key == key and [m.body for m in queue.pending] == [b"1"]


def test_what_expired_while_down_is_expired_after_everything_is_back() -> None:
    """Under --expired dead-letter, a dead-letter queue gets expired messages after its own."""
    rebuilt = engine(expired="dead-letter")
    state = RecoveredState.from_records(
        [
            stored("/queue/a", 1, "/queue/a", expires=NOW - 1),
            stored("/queue/DLQ.a", 2, "/queue/DLQ.a"),
            stored("/queue/a", 3, "/queue/a", expires=NOW + 60),
        ],
        [],
    )
    rebuild(rebuilt, state)
    assert [m.body for m in rebuilt.queues["/queue/a"].pending] == [b"3"]
    assert [m.body for m in rebuilt.queues["/queue/DLQ.a"].pending] == [b"2", b"1"]
    assert rebuilt.counters.expired == 1


def test_keys_that_are_neither_queue_nor_durable_are_ignored() -> None:
    """Stored messages under a key no queue has, and bad subscription keys, are skipped."""
    rebuilt = engine()
    state = RecoveredState.from_records(
        [stored("/topic/x", 1, "/topic/x")], [DurableSubscription("not-durable", "/topic/x")]
    )
    rebuild(rebuilt, state)
    assert (rebuilt.queues, rebuilt.durable, len(rebuilt.topics)) == ({}, {}, 0)


def test_readiness_answers_those_who_wait_before_and_after() -> None:
    """when_ready fires for waiters once recovery has ended, and at once afterwards."""
    readiness = Readiness()
    early: list[Any] = []
    readiness.when_ready().addCallback(early.append)
    assert early == []
    readiness.ended(None)
    late: list[Any] = []
    readiness.when_ready().addCallback(late.append)
    assert (early, late, readiness.outcome) == ([None], [None], True)


def test_readiness_passes_on_a_failed_recovery() -> None:
    """A recovery that failed fails every when_ready, earlier and later, with its failure."""
    readiness = Readiness()
    failures: list[Failure] = []
    readiness.when_ready().addErrback(failures.append)
    readiness.ended(Failure(StoreDamaged("bad page")))
    readiness.when_ready().addErrback(failures.append)
    assert [failure.check(StoreDamaged) for failure in failures] == [StoreDamaged, StoreDamaged]
    with pytest.raises(StoreDamaged):
        readiness.outcome.raiseException()  # type: ignore[union-attr]
