"""
Scheduled repeats survive the node that claims them (docs/design/cluster.md,
"Scheduled delivery"): a real ``redis-server`` and ``twistd`` nodes; a
delivery claimed by a node that dies before routing it is routed by another
node once its lease runs out, and the repeats after it stay armed.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
import redis

from stompbroker.broker.engine.redis.scheduling import CLAIM
from tests.support.clients import connect, through
from tests.support.redis import (  # noqa: F401
    NODE_TIMEOUT,
    RedisServer,
    redis_server,
    started_nodes,
    unique,
)

pytestmark = pytest.mark.integration

DUE, JOBS, FLYING = "stompbroker:{sched}", "stompbroker:{sched}:jobs", "stompbroker:{sched}:flying"

#: Seconds a test waits for what its nodes owe it (past a lease of --node-timeout).
WAIT = 3 * float(NODE_TIMEOUT) + 10


def schedule(
    connection: Any, queue: str, delay: int, period: int, repeat: int, **more: str
) -> None:
    """Send a scheduled repeat of ``tick`` to ``queue``, with the receipt ``scheduled``."""
    connection.send(
        queue,
        b"tick",
        headers={
            "AMQ_SCHEDULED_DELAY": str(delay),
            "AMQ_SCHEDULED_PERIOD": str(period),
            "AMQ_SCHEDULED_REPEAT": str(repeat),
            **more,
        },
        receipt="scheduled",
    )


def wait_until_finished(client: redis.Redis) -> None:
    """Wait until every job had its last delivery routed (nothing due, in flight or filed)."""
    deadline = time.monotonic() + WAIT
    while client.zcard(DUE) or client.zcard(FLYING) or client.hlen(JOBS):
        assert time.monotonic() < deadline, "scheduled jobs never finished"
        time.sleep(0.05)


def test_a_delivery_claimed_by_a_node_that_died_is_routed_by_another(
    redis_server: RedisServer,  # noqa: F811
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """
    A repeat of four is sent on node A, which then stops; a node claims the first
    delivery and dies before routing it (the test runs the claim script itself);
    node B routes that delivery when its lease runs out, with the SEND's
    message-id, and the three repeats after it: four in all.
    """
    client = redis.Redis(port=redis_server.port)
    queue = unique("/queue/repeat.claimed.")
    with started_nodes(tmp_path_factory, redis_server, "a") as (a,):
        producer, sent = connect(a.address)
        schedule(producer, queue, 1500, 300, 3, persistent="true")
        assert sent.wait_for(lambda: "scheduled" in sent.receipts, WAIT)
        producer.disconnect()
    [job] = client.zrange(DUE, 0, -1)
    deadline = time.monotonic() + WAIT
    while True:
        reply = client.eval(CLAIM, 3, DUE, JOBS, FLYING, 100, int(float(NODE_TIMEOUT) * 1000))
        if reply[2:]:
            break
        assert time.monotonic() < deadline, "the job never came due"
        time.sleep(0.05)
    assert reply[2:4] == [job, 1]
    claimed_at = time.monotonic()
    with started_nodes(tmp_path_factory, redis_server, "b") as (b,):
        consumer, inbox = connect(b.address)
        consumer.subscribe(queue, id="q")
        assert inbox.wait_for(lambda: len(inbox.messages) >= 4, WAIT), inbox.bodies()
        wait_until_finished(client)
        through(inbox, (b.address, queue), timeout=WAIT)
        ticks = inbox.messages
        assert [m.body for m in ticks] == [b"tick"] * 4
        first = [m for m in ticks if m.headers["message-id"] == job.decode()]
        assert len(first) == 1, "the claimed delivery was not routed once with its message-id"
        assert len({m.headers["message-id"] for m in ticks}) == 4
        assert time.monotonic() - claimed_at >= float(NODE_TIMEOUT) - 0.5
        consumer.disconnect()
    client.close()


def test_a_repeat_counts_right_when_a_claiming_node_is_killed(
    redis_server: RedisServer,  # noqa: F811
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """
    Two nodes claim a fast repeat between them; one is SIGKILLed right after it
    fired one: the consumer on the other gets each delivery once, all of them.
    """
    client = redis.Redis(port=redis_server.port)
    queue = unique("/queue/repeat.killed.")
    deliveries = 16
    with started_nodes(tmp_path_factory, redis_server, "ab") as (a, b):
        consumer, inbox = connect(a.address)
        consumer.subscribe(queue, id="q", receipt="on")
        assert inbox.wait_for(lambda: "on" in inbox.receipts, WAIT)
        producer, sent = connect(b.address)
        schedule(producer, queue, 200, 150, deliveries - 1)
        assert sent.wait_for(lambda: "scheduled" in sent.receipts, WAIT)
        assert inbox.wait_for(lambda: len(inbox.messages) >= 4, WAIT)
        # Right after a firing: the next claim is due a period from now.
        b.process.kill()
        b.process.wait(timeout=10)
        wait_until_finished(client)
        through(inbox, (a.address, queue), timeout=WAIT)
        assert [m.body for m in inbox.messages] == [b"tick"] * deliveries
        assert len({m.headers["message-id"] for m in inbox.messages}) == deliveries
        consumer.disconnect()
    client.close()
