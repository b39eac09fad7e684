"""Policies applied to a local engine's queues: limits, overflow, TTL, expiry, dead letters."""

from __future__ import annotations

from typing import Any

import pytest
from twisted.internet.task import Clock

from stompbroker.broker.engine.local import LocalEngine
from stompbroker.broker.features.policies import parse_policy
from stompbroker.broker.routing.virtual_hosts import VirtualHost
from stompbroker.protocol.errors import LimitExceeded
from stompbroker.protocol.message import Message
from tests.support.broker import Inbox


def _engine(**settings: Any) -> tuple[LocalEngine, Clock]:
    clock = Clock()
    engine = LocalEngine(clock)
    engine.policies.set(parse_policy("p", {"pattern": "q.>", "apply-to": "queues", **settings}))
    return engine, clock


def _send(engine: LocalEngine, *bodies: bytes, destination: str = "/queue/q.a") -> None:
    for body in bodies:
        engine.publish_queue(Message(destination, body.decode(), (), body))


def _waiting(engine: LocalEngine, destination: str = "/queue/q.a") -> list[bytes]:
    return [m.body for m in engine.queue(destination).pending]


def test_drop_head_keeps_the_newest() -> None:
    engine, _ = _engine(**{"max-length": 2})
    _send(engine, b"1", b"2", b"3")
    assert _waiting(engine) == [b"2", b"3"]
    assert engine.counters.discarded == 1


def test_reject_publish_refuses_naming_the_limit_and_the_policy() -> None:
    engine, _ = _engine(**{"max-length": 1, "overflow": "reject-publish"})
    _send(engine, b"1")
    with pytest.raises(LimitExceeded) as caught:
        _send(engine, b"2")
    assert "max-length 1" in caught.value.detail and "policy p" in caught.value.detail
    assert _waiting(engine) == [b"1"]


def test_dead_letter_overflow_moves_the_head_to_the_policy_dead_letter_queue() -> None:
    engine, _ = _engine(
        **{"max-length": 1, "overflow": "dead-letter", "dead-letter": "/queue/dead"}
    )
    _send(engine, b"1", b"2")
    assert _waiting(engine) == [b"2"]
    dead = engine.queue("/queue/dead").pending[0]
    assert dead.body == b"1" and ("dead-letter-reason", "maxlen") in dead.headers


def test_a_virtual_hosts_policy_limits_its_queues_and_dead_letters_in_its_host() -> None:
    """
    A policy of ``shop`` limits ``shop``'s ``/queue/q.a``, not the default host's of the
    same name, and its dead-letter queue is ``shop``'s ``/queue/dead``.
    """
    clock = Clock()
    engine = LocalEngine(clock)
    shop = VirtualHost("shop")
    engine.policies.set(
        parse_policy(
            "p",
            {
                "pattern": "q.>",
                "vhost": "shop",
                "max-length": 1,
                "overflow": "dead-letter",
                "dead-letter": "/queue/dead",
            },
        )
    )
    in_shop = shop.internal("/queue/q.a")
    _send(engine, b"1", b"2", destination=in_shop)
    _send(engine, b"1", b"2")
    assert _waiting(engine, in_shop) == [b"2"]
    assert _waiting(engine) == [b"1", b"2"]
    assert [m.body for m in engine.queue(shop.internal("/queue/dead")).pending] == [b"1"]
    assert "/queue/dead" not in engine.queues


def test_a_byte_limit_counts_waiting_bodies() -> None:
    engine, _ = _engine(**{"max-length-bytes": 5, "overflow": "reject-publish"})
    _send(engine, b"abc", b"d")
    with pytest.raises(LimitExceeded) as caught:
        _send(engine, b"ef")
    assert "max-length-bytes 5" in caught.value.detail


def test_messages_handed_out_no_longer_count() -> None:
    engine, _ = _engine(**{"max-length": 1, "overflow": "reject-publish"})
    engine.queue("/queue/q.a").add_consumer(Inbox("/queue/q.a"), 10, 6)
    _send(engine, b"1", b"2", b"3")
    assert _waiting(engine) == []


def test_message_ttl_expires_what_waits_too_long() -> None:
    engine, clock = _engine(**{"message-ttl": 1000})
    _send(engine, b"1")
    clock.advance(2)
    inbox = Inbox("/queue/q.a")
    engine.queue("/queue/q.a").add_consumer(inbox, 10, 6)
    assert inbox.bodies() == [] and engine.counters.expired == 1


def test_an_unused_queue_expires_with_what_it_holds() -> None:
    engine, clock = _engine(expires=5000)
    _send(engine, b"1")
    clock.advance(4)
    assert engine.find_queue("/queue/q.a") is not None
    clock.advance(1)
    assert engine.find_queue("/queue/q.a") is None


def test_a_consumed_queue_does_not_expire_until_its_last_consumer_leaves() -> None:
    engine, clock = _engine(expires=5000)
    _send(engine, b"1", b"2")
    queue = engine.queue("/queue/q.a")
    consumer = queue.add_consumer(Inbox("/queue/q.a"), 1, 6)
    clock.advance(10)
    assert engine.find_queue("/queue/q.a") is queue
    queue.remove_consumer(consumer)
    engine.release_queue(queue)
    clock.advance(5)
    assert engine.find_queue("/queue/q.a") is None


def test_a_policy_set_later_applies_to_an_existing_queue_and_removing_it_lifts_it() -> None:
    clock = Clock()
    engine = LocalEngine(clock)
    _send(engine, b"1", b"2")
    engine.policies.set(
        parse_policy("p", {"pattern": "q.a", "max-length": 2, "overflow": "reject-publish"})
    )
    with pytest.raises(LimitExceeded):
        _send(engine, b"3")
    engine.policies.remove("p")
    _send(engine, b"3")
    assert _waiting(engine) == [b"1", b"2", b"3"]


def test_a_queue_without_a_policy_has_no_limits() -> None:
    engine, _ = _engine(**{"max-length": 1})
    _send(engine, b"1", b"2", destination="/queue/other")
    assert engine.queue("/queue/other").limits is None
    assert _waiting(engine, "/queue/other") == [b"1", b"2"]
