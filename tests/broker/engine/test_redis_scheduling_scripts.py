"""
The scheduled-delivery scripts of the redis engine
(:mod:`stompbroker.broker.engine.redis.scheduling`), run on a real
``redis-server`` with a plain redis-py client: a claim re-arms the next repeat
and leases the due delivery in one script; a lease that runs out (its claimer
died before routing) is claimed again, with its own delivery number; a settle
ends the leases and removes a job once its last delivery is routed
(docs/design/cluster.md, "Scheduled delivery").
"""

from __future__ import annotations

import time

import pytest
import redis

from stompbroker.broker.engine.redis.codec import encode
from stompbroker.broker.engine.redis.scheduling import (
    ADD,
    CLAIM,
    SETTLE,
    pack_job,
    unpack_job,
)
from stompbroker.broker.features.schedule_rules import Schedule
from stompbroker.protocol.message import Message
from tests.support.redis import redis_client, redis_server  # noqa: F401

DUE, JOBS, FLYING, CHANNEL = "t:{sched}", "t:{sched}:jobs", "t:{sched}:flying", "t:sched:due"


@pytest.fixture
def client(redis_client: redis.Redis) -> redis.Redis:  # noqa: F811
    return redis_client


def add(client: redis.Redis, job: str, period: int, repeat: int) -> None:
    """File a job due at once, as a SEND with a period and a repeat count would."""
    message = Message("/queue/q", job, (), b"tick")
    packed = pack_job("n1", message, Schedule(0, period, repeat))
    client.eval(ADD, 2, DUE, JOBS, CHANNEL, job, 0, packed)


def claim(client: redis.Redis, lease_ms: int = 60_000) -> list[tuple[str, int, bool]]:
    """:returns: what one claim gave: (job, delivery number, whether it is the last)."""
    reply = client.eval(CLAIM, 3, DUE, JOBS, FLYING, 100, lease_ms)
    claimed = reply[2:]
    out = []
    for index in range(0, len(claimed), 3):
        fired = int(claimed[index + 1])
        state = unpack_job(claimed[index + 2])
        out.append((claimed[index].decode(), fired, state.is_last(fired)))
    return out


def settle(client: redis.Redis, deliveries: list[tuple[str, int, bool]]) -> None:
    args: list[object] = []
    for job, fired, _ in deliveries:
        args += [job, fired]
    client.eval(SETTLE, 2, FLYING, JOBS, *args)


def test_a_claim_re_arms_the_next_repeat_and_leases_the_due_one(client: redis.Redis) -> None:
    """One script: the job is due again a period later, and the delivery it gave is in flight."""
    add(client, "j", period=60_000, repeat=2)
    assert claim(client) == [("j", 1, False)]
    assert client.zscore(DUE, "j") is not None
    assert client.zrange(FLYING, 0, -1) == [b"1 j"]
    assert claim(client) == []
    settle(client, [("j", 1, False)])
    assert client.zcard(FLYING) == 0
    assert unpack_job(client.hget(JOBS, "j")).flying == 0


def test_a_delivery_whose_claimer_died_is_claimed_again_once(client: redis.Redis) -> None:
    """A lease that runs out unsettled gives the same delivery to the next claim, and only to it."""
    add(client, "j", period=60_000, repeat=-1)
    assert claim(client, lease_ms=1) == [("j", 1, False)]
    time.sleep(0.01)
    again = claim(client)
    assert again == [("j", 1, False)]
    assert claim(client) == []
    settle(client, again)
    # A late settle from the node that died (it was only slow) changes nothing more.
    settle(client, again)
    assert client.zcard(FLYING) == 0
    assert unpack_job(client.hget(JOBS, "j")).fired == 1


def test_the_last_delivery_removes_the_job_once_settled(client: redis.Redis) -> None:
    """A job with no repeat leaves the due set at its claim and the hash at its settle."""
    add(client, "once", period=0, repeat=0)
    claimed = claim(client)
    assert claimed == [("once", 1, True)]
    assert client.zcard(DUE) == 0
    assert client.hexists(JOBS, "once")
    settle(client, claimed)
    assert not client.hexists(JOBS, "once")


def test_the_job_stays_while_an_earlier_delivery_is_in_flight(client: redis.Redis) -> None:
    """The last delivery settled before a lost earlier one: the job waits for that one too."""
    add(client, "j", period=0, repeat=1)
    first = claim(client, lease_ms=300)
    assert first == [("j", 1, False)]
    last = claim(client)
    assert last == [("j", 2, True)]
    settle(client, last)
    assert client.hexists(JOBS, "j")
    time.sleep(0.35)
    recovered = claim(client)
    assert recovered == [("j", 1, False)]
    settle(client, recovered)
    assert not client.hexists(JOBS, "j")


def test_a_job_filed_in_the_older_state_line_is_still_delivered(client: redis.Redis) -> None:
    """A job whose state line has no flying count (written by an older node) is read as 0."""
    value = b"0 0 0 0\n" + encode("n1", Message("/queue/q", "old", (), b"x"))
    client.hset(JOBS, "old", value)
    client.zadd(DUE, {"old": 0})
    claimed = claim(client)
    assert claimed == [("old", 1, True)]
    settle(client, claimed)
    assert not client.hexists(JOBS, "old")


def test_an_unreadable_job_is_removed_and_reported(client: redis.Redis) -> None:
    """A state line CLAIM cannot read is removed, and answered with delivery -1."""
    client.hset(JOBS, "bad", b"nonsense")
    client.zadd(DUE, {"bad": 0})
    reply = client.eval(CLAIM, 3, DUE, JOBS, FLYING, 100, 1000)
    assert reply[2:] == [b"bad", -1, b"nonsense"]
    assert client.zcard(DUE) == 0 and not client.hexists(JOBS, "bad")
