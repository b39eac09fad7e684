"""
How a node reads a shared queue (stompbroker.broker.engine.redis.queue_reading):
the raw replies of its read, taken apart as redis-py would, in RESP2 and RESP3.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from redis import asyncio as aioredis

from stompbroker.broker.engine.redis.queue_reading import runs_of
from stompbroker.broker.engine.redis.wire import execute, pack
from tests.support.redis import RedisServer, redis_server  # noqa: F401


@pytest.mark.parametrize("protocol", [2, 3])
def test_a_read_gives_entries_as_redis_pys_xreadgroup_gives_them(
    redis_server: RedisServer,  # noqa: F811
    protocol: int,
) -> None:
    """Entries of one field and of several, from two streams, in order; nothing when empty."""

    async def main() -> tuple[Any, Any]:
        client = aioredis.Redis(port=redis_server.port, protocol=protocol)
        try:
            await client.delete("r:a", "r:b")
            for stream in ("r:a", "r:b"):
                await client.xgroup_create(stream, "nodes", id="0", mkstream=True)
            await client.xadd("r:a", {"m": b"one"}, id="1-1")
            await client.xadd("r:a", {"m": b"two", "r": b"1"}, id="1-2")
            await client.xadd("r:b", {"m": b"three"}, id="2-1")
            read = ("XREADGROUP", "GROUP", "nodes", "n1", "COUNT", 10, "BLOCK", 10)
            read += ("STREAMS", "r:a", "r:b", ">", ">")
            (reply,) = await execute(client, pack([read]), 1)
            (empty,) = await execute(client, pack([read]), 1)
            return runs_of(reply), runs_of(empty)
        finally:
            await client.aclose()

    runs, empty = asyncio.run(main())
    assert runs == [
        ("r:a", [(b"1-1", {b"m": b"one"}), (b"1-2", {b"m": b"two", b"r": b"1"})]),
        ("r:b", [(b"2-1", {b"m": b"three"})]),
    ]
    assert empty == []
