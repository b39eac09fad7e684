"""
A policy's queue ``expires`` on the redis engine's shared queues
(:mod:`stompbroker.broker.engine.redis.shared_expiry`): which queues are
candidates, and the sweeping script's marks, run on a real ``redis-server``
with a plain redis-py client.
"""

from __future__ import annotations

import time

import pytest
import redis

from stompbroker.broker.engine.redis.keys import lane_streams, mode_key, registry_key
from stompbroker.broker.engine.redis.shared_expiry import CLAIM, LEASE, SWEEP, candidates
from stompbroker.broker.features.policies import Policies, parse_policy
from tests.support.redis import redis_client, redis_server  # noqa: F401

QUEUE = "/queue/ttl.a"
STREAM = f"p:{{q:{QUEUE}}}"


@pytest.fixture
def client(redis_client: redis.Redis) -> redis.Redis:  # noqa: F811
    return redis_client


def sweep(client: redis.Redis, expires: int = 50, policy: str = "ttl") -> list[bytes]:
    """Run :data:`SWEEP` for :data:`QUEUE`, as the sweeping node does."""
    keys = ["p:{expiry}:used", "p:{expiry}:tags", registry_key("p", QUEUE), mode_key("p", QUEUE)]
    keys += lane_streams("p", QUEUE)
    reply = client.eval(SWEEP, len(keys), *keys, CLAIM, QUEUE, expires, policy)
    assert isinstance(reply, list)
    return reply


def test_candidates_are_the_queues_a_policy_with_expires_is_in_force_on() -> None:
    """Topics, queues no policy matches and policies without expires are left out."""
    policies = Policies()
    policies.set(parse_policy("ttl", {"pattern": "ttl.>", "expires": 500}), announce=False)
    policies.set(parse_policy("cap", {"pattern": "cap.>", "max-length": 5}), announce=False)
    names = [b"/queue/ttl.b", "/queue/ttl.a", b"/queue/cap.a", b"/queue/other", b"/topic/ttl.a"]
    assert candidates(policies, names) == [
        ("/queue/ttl.a", 500, "ttl"),
        ("/queue/ttl.b", 500, "ttl"),
    ]


def test_a_queue_unused_past_its_expires_is_claimed_once(client: redis.Redis) -> None:
    """The first sweep starts the clock; past expires one sweep returns it, the next does not."""
    client.xadd(STREAM, {"m": b"x"})
    assert sweep(client) == []
    time.sleep(0.08)
    assert sweep(client) == [QUEUE.encode()]
    assert sweep(client) == []


def test_a_queue_with_a_consumer_on_any_node_does_not_expire(client: redis.Redis) -> None:
    """While its registry holds a consumer, every sweep moves its mark to now."""
    client.xadd(STREAM, {"m": b"x"})
    client.hset(registry_key("p", QUEUE), "n1/1", "[]")
    assert sweep(client) == []
    time.sleep(0.08)
    assert sweep(client) == []
    client.delete(registry_key("p", QUEUE))
    assert sweep(client) == []
    time.sleep(0.08)
    assert sweep(client) == [QUEUE.encode()]


def test_a_consumer_that_came_and_went_between_sweeps_restarts_the_clock(
    client: redis.Redis,
) -> None:
    """The registry's version moved: the queue was used since the last sweep."""
    client.xadd(STREAM, {"m": b"x"})
    assert sweep(client) == []
    time.sleep(0.08)
    client.hincrby(mode_key("p", QUEUE), "v", 2)
    assert sweep(client) == []
    time.sleep(0.08)
    assert sweep(client) == [QUEUE.encode()]


def test_a_policy_set_on_an_existing_queue_counts_from_its_setting(client: redis.Redis) -> None:
    """A mark taken under another policy (or expires) starts again, as on one node."""
    client.xadd(STREAM, {"m": b"x"})
    assert sweep(client, policy="old") == []
    time.sleep(0.08)
    assert sweep(client, policy="new") == []
    assert sweep(client, policy="new", expires=60_000) == []


def test_a_queue_whose_streams_are_gone_loses_its_mark(client: redis.Redis) -> None:
    """Nothing to delete: the marks go, and a queue made again starts afresh."""
    client.xadd(STREAM, {"m": b"x"})
    assert sweep(client) == []
    client.delete(STREAM)
    assert sweep(client) == []
    assert not client.hexists("p:{expiry}:used", QUEUE)
    assert not client.hexists("p:{expiry}:tags", QUEUE)


def test_a_queue_with_only_a_priority_lane_counts_as_made(client: redis.Redis) -> None:
    """Its lanes are its streams too."""
    client.xadd(f"p:{{q:{QUEUE}}}:lane:7", {"m": b"x"})
    assert sweep(client) == []
    time.sleep(0.08)
    assert sweep(client) == [QUEUE.encode()]


def test_one_node_at_a_time_holds_the_sweeping_lease(client: redis.Redis) -> None:
    """The holder renews it; another node gets it only once it has run out."""
    assert client.eval(LEASE, 1, "p:{expiry}:lease", "n1", 100) == 1
    assert client.eval(LEASE, 1, "p:{expiry}:lease", "n2", 100) == 0
    assert client.eval(LEASE, 1, "p:{expiry}:lease", "n1", 100) == 1
    time.sleep(0.15)
    assert client.eval(LEASE, 1, "p:{expiry}:lease", "n2", 100) == 1
