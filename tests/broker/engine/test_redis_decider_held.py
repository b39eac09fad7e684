"""
The deciding node's entries that no consumer took
(:class:`~stompbroker.broker.engine.redis.cluster_dispatch.ClusterDispatch`, read by
:class:`~stompbroker.broker.engine.redis.queue_reading.QueueReading`), on a real
``redis-server``: decided again once a consumer that selects them registers,
whichever of the node's refreshes reads the new registry first; and what the
decider keeps for its own consumers counted against their room in the batch
(:data:`~stompbroker.broker.engine.redis.dispatch_scripts.MOVE`; docs/design/cluster.md,
"Selectors, consumer priorities, exclusive consumers and message groups").
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

import redis.asyncio
from twisted.internet import task

from stompbroker.broker.engine.redis.cluster_dispatch import ClusterDispatch
from stompbroker.broker.engine.redis.codec import encode
from stompbroker.broker.engine.redis.consumer_registry import REGISTER
from stompbroker.broker.engine.redis.dispatch_scripts import MOVE
from stompbroker.broker.engine.redis.keys import Keys, lane_streams
from stompbroker.broker.engine.redis.queue_credit import QueueCredit
from stompbroker.broker.engine.redis.queue_reading import QueueReading
from stompbroker.protocol.message import Message
from tests.support.queue_scripts import RecordingWriter
from tests.support.redis import RedisServer, redis_client, redis_server  # noqa: F401

QUEUE = "/queue/held"
NAMES = Keys("h")
STREAM = NAMES.queue(QUEUE)


class Engine:
    """
    What a queue's dispatch and reading use of the engine: names, ids, a client, a
    clock, and the credit its reads measure (whose holds this test does not watch).
    """

    def __init__(self, port: int) -> None:
        self.names = NAMES
        self.ids = type("Ids", (), {"node": "c"})()
        self.client = redis.asyncio.Redis(port=port)
        self.unretried = self.client
        self.writer = RecordingWriter()
        self.clock = type("Clock", (), {"seconds": staticmethod(time.monotonic)})()
        self.node_timeout = 2.0
        self.credit = QueueCredit(task.Clock())


class Local:
    """A local queue that never was single-active, as the decider declares it."""

    def declare_single_active(self, single_active: bool) -> None:
        """The roster of these tests never declares the queue single-active."""
        assert not single_active


async def register(client: Any, field: str, selector: str) -> None:
    """Register a consumer as its node's SUBSCRIBE does, its node alive."""
    node = field.partition("/")[0]
    await client.set(NAMES.alive(node), 1)
    lanes = lane_streams(NAMES.prefix, QUEUE)
    keys = [f"h:{{q:{QUEUE}}}:consumers", f"h:{{q:{QUEUE}}}:mode", *lanes]
    args = [field, node, selector, 0, 0, "", 1, NAMES.alive("")]
    await client.eval(REGISTER, len(keys), *keys, *args)


def run(server: RedisServer, job: Callable[[Engine], Awaitable[Any]]) -> Any:
    async def main() -> Any:
        engine = Engine(server.port)
        try:
            await engine.client.flushall()
            return await job(engine)
        finally:
            await engine.client.aclose()

    return asyncio.run(main())


def test_a_held_entry_goes_to_a_new_consumer_the_claims_refresh_saw_first(
    redis_server: RedisServer,  # noqa: F811
) -> None:
    """
    Node C decides for its blue consumer and holds a red message nobody
    selects; node B's red consumer registers, and C's periodic claim of dead
    nodes' entries reads the registry before C's reader looks at ``v`` again:
    C's next read still moves the red message to B's own stream.
    """

    async def job(engine: Engine) -> tuple[list[Any], int, int]:
        client = engine.client
        dispatch = ClusterDispatch(engine, QUEUE, STREAM, lambda: 1, Local())
        reading = QueueReading(engine, QUEUE, STREAM, dispatch)
        await client.xgroup_create(STREAM, NAMES.group, id="0", mkstream=True)
        await register(client, "c/1", "color = 'blue'")
        dispatch.active = True
        await dispatch.refresh()
        red = Message(QUEUE, "id-red", (("color", "red"),), b"job")
        await client.xadd(STREAM, {"m": encode("a", red)})
        first = await reading.read(1)
        held = len(dispatch.held)
        await register(client, "b/1", "color = 'red'")
        await dispatch.refresh()  # what QueueRecovery.claim_from_dead does, every so often
        second = await reading.read(1)
        moved: int = await client.xlen(dispatch.node_stream("b"))
        return first + second, held, moved

    kept, held, moved = run(redis_server, job)
    assert kept == []
    assert held == 1
    assert moved == 1


def test_the_decider_keeps_no_more_than_its_consumers_room_while_another_node_has_some(
    redis_client: Any,  # noqa: F811
) -> None:
    """
    Node C decides four entries for its consumer and B's, each with room for
    one (C's room is 1, B's window 1): they alternate, C, B, C, B (the last two
    in turn, neither having room), rather than C keeping what B could take.
    """
    client = redis_client
    mode, registry, groups = (
        f"h:{{q:{QUEUE}}}:mode",
        f"h:{{q:{QUEUE}}}:consumers",
        f"h:{{q:{QUEUE}}}:groups",
    )
    client.xgroup_create(STREAM, NAMES.group, id="0", mkstream=True)
    for order, field in enumerate(("c/1", "b/1"), 1):
        client.hset(registry, field, "[]")
        client.hset(mode, "s", order)
    for n in range(4):
        client.xadd(STREAM, {"m": encode("a", Message(QUEUE, f"id-{n}", (), b"job"))})
    read = client.xreadgroup(NAMES.group, "c", {STREAM: ">"}, count=4)
    args: list[Any] = [NAMES.group, f"h:{{q:{QUEUE}}}:node:", f"h:{{q:{QUEUE}}}:returned", "c", 1]
    for entry_id, fields in read[0][1]:
        args += [STREAM, entry_id, fields[b"m"], "", 0, "", "", 2, 2, "c", 1, "b", 1]
        args += ["c/1", "c", 0, 1, "b/1", "b", 0, 2]
    answers = client.eval(MOVE, 3, registry, groups, mode, *args)
    assert answers[::2] == [b"c", b"b", b"c", b"b"]
    assert client.xlen(f"h:{{q:{QUEUE}}}:node:b") == 2
