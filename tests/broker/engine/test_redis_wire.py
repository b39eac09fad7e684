"""
A pipeline in one write and its replies in one read loop
(:mod:`stompbroker.broker.engine.redis.wire`), against a real ``redis-server``.
"""

from __future__ import annotations

import asyncio
from typing import Any

import hiredis
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from redis import asyncio as aioredis
from redis._parsers import _AsyncRESP2Parser
from redis._parsers.base import BaseParser
from redis._parsers.hiredis import NOT_ENOUGH_DATA
from redis.exceptions import BusyLoadingError, DataError, ReadOnlyError, ResponseError
from redis.exceptions import TimeoutError as RedisTimeout

from stompbroker.broker.engine.redis.wire import _read, errors, execute, pack, shaped
from tests.support.redis import RedisServer, redis_server  # noqa: F401


def run(server: RedisServer, commands: list[tuple[Any, ...]], **options: Any) -> list[Any]:
    """:returns: the replies of ``commands`` sent as one pipeline through :func:`execute`."""

    async def main() -> list[Any]:
        pool = aioredis.ConnectionPool(port=server.port, **options)
        client = aioredis.Redis(connection_pool=pool)
        try:
            return await execute(client, pack(commands), len(commands))
        finally:
            await client.aclose()
            await pool.aclose()

    return asyncio.run(main())


@settings(derandomize=True, max_examples=50)
@given(
    st.sampled_from(["XADD", "XACK", "EVALSHA"]),
    st.lists(
        st.one_of(
            st.binary(max_size=40),
            st.text(max_size=20),
            st.integers(min_value=-(2**63), max_value=2**63 - 1),
        ),
        max_size=6,
    ),
)
def test_a_command_is_packed_as_redis_py_packs_it(name: str, args: list[Any]) -> None:
    """The bytes are those redis-py's own connection would send."""
    from redis.connection import Connection

    expected = b"".join(Connection().pack_command(name, *args))
    assert pack([(name, *args)]) == expected


def test_a_kept_head_serves_only_its_own_command() -> None:
    """Messages to two streams, interleaved and again, pack as redis-py packs each."""
    from redis.connection import Connection

    commands = [
        ("XADD", stream, "*", "m", b"x" * size)
        for size in (1, 22, 0, 333)
        for stream in ("w:a", "w:b")
    ]
    commands.append(("XACK", "w:a", "nodes", b"1-1"))
    expected = b"".join(b"".join(Connection().pack_command(*args)) for args in commands)
    assert pack(commands) == pack(commands) == expected


def test_floats_go_as_redis_py_sends_them_and_booleans_are_refused() -> None:
    assert pack([("SET", "k", 0.5)]) == b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$3\r\n0.5\r\n"
    with pytest.raises(DataError):
        pack([("SET", "k", True)])
    with pytest.raises(DataError):
        pack([("SET", "k", None)])


def test_every_reply_comes_back_in_order_errors_as_values(
    redis_server: RedisServer,  # noqa: F811
) -> None:
    """Replies of all kinds, an error among them, each in its command's place."""
    commands: list[tuple[Any, ...]] = [("DEL", "w:s", "w:k", "w:h")]
    commands += [("XADD", "w:s", "*", "m", b"x" * size) for size in (0, 1, 70_000)]
    commands += [
        ("SET", "w:k", "v"),
        ("INCR", "w:k"),
        ("RPUSH", "w:h", "a", "1"),
        ("LRANGE", "w:h", 0, -1),
        ("XLEN", "w:s"),
        ("GET", "w:nothing"),
    ]
    replies = run(redis_server, commands)
    assert len(replies) == len(commands)
    assert all(isinstance(reply, bytes) and b"-" in reply for reply in replies[1:4])
    assert replies[4] is True or replies[4] == b"OK"
    assert isinstance(replies[5], ResponseError)
    assert replies[6:] == [2, [b"a", b"1"], 3, None]


def test_a_reply_is_shaped_as_redis_pys_pipeline_shapes_it(
    redis_server: RedisServer,  # noqa: F811
) -> None:
    """HGETALL as a dict, XRANGE as (id, fields) pairs, an error left as it is."""
    commands: list[tuple[Any, ...]] = [
        ("DEL", "w:h", "w:x"),
        ("HSET", "w:h", "a", "1"),
        ("XADD", "w:x", "1-1", "m", "v"),
        ("HGETALL", "w:h"),
        ("XRANGE", "w:x", "-", "+"),
        ("INCR", "w:h"),
    ]

    async def main() -> list[Any]:
        client = aioredis.Redis(port=redis_server.port)
        try:
            replies = await execute(client, pack(commands), len(commands))
            pairs = zip(commands, replies, strict=True)
            return [shaped(client, args, reply) for args, reply in pairs]
        finally:
            await client.aclose()

    replies = asyncio.run(main())
    assert replies[3] == {b"a": b"1"}
    assert replies[4] == [(b"1-1", {b"m": b"v"})]
    assert isinstance(replies[5], ResponseError)


@pytest.mark.parametrize("parser", ["hiredis", "python"])
def test_thousands_of_replies_over_many_reads(
    redis_server: RedisServer,  # noqa: F811
    parser: str,
) -> None:
    """More replies than one socket read holds are all read, none twice, with either parser."""
    options: dict[str, Any] = {"socket_read_size": 4096}
    if parser == "python":
        options["parser_class"] = _AsyncRESP2Parser
    commands: list[tuple[Any, ...]] = [("DEL", "w:n")]
    commands += [("INCR", "w:n") for _ in range(20_000)]
    commands += [("INCR", "w:nothing", "extra")]
    replies = run(redis_server, commands, **options)
    assert replies[1:-1] == list(range(1, 20_001))
    assert isinstance(replies[-1], ResponseError)


def test_the_connection_goes_back_to_the_pool_for_the_next_pipeline(
    redis_server: RedisServer,  # noqa: F811
) -> None:
    async def main() -> list[Any]:
        client = aioredis.Redis(port=redis_server.port)
        try:
            first = await execute(client, pack([("PING",)]), 1)
            second = await execute(client, pack([("ECHO", "a"), ("ECHO", "b")]), 2)
            return [first, second, len(client.connection_pool._available_connections)]
        finally:
            await client.aclose()

    first, second, idle = asyncio.run(main())
    assert first in ([True], [b"PONG"]) and second == [b"a", b"b"] and idle == 1


def test_replies_that_keep_coming_are_waited_for_and_silence_times_out(
    redis_server: RedisServer,  # noqa: F811
) -> None:
    """Each reply may take the timeout, the pipeline longer; past it, redis-py's TimeoutError."""

    async def main() -> tuple[list[Any], type[BaseException] | None, list[Any]]:
        client = aioredis.Redis(port=redis_server.port)
        try:
            # Five reads that each wait 0.2 s for nothing: 1 s in all, a 0.5 s timeout.
            slow = [("BLPOP", "w:none", "0.2")] * 5
            replies = await execute(client, pack(slow), 5, timeout=0.5)
            raised = None
            try:
                await execute(client, pack([("BLPOP", "w:none", "2")]), 1, timeout=0.3)
            except RedisTimeout as error:
                raised = type(error)
            after = await execute(client, pack([("ECHO", "again")]), 1)
            return replies, raised, after
        finally:
            await client.aclose()

    replies, raised, after = asyncio.run(main())
    assert replies == [None] * 5
    assert raised is RedisTimeout
    assert after == [b"again"]


def test_the_error_replies_are_told_apart_in_order() -> None:
    """:func:`errors` lists a pipeline's error replies, and only those, in order."""
    refused, readonly = ResponseError("WRONGTYPE"), ReadOnlyError("READONLY")
    assert errors([]) == []
    assert errors([b"1-1", 2, None, [b"a"], True]) == []
    assert errors([b"1-1", refused, 3, readonly]) == [refused, readonly]


class _Parser:
    """A hiredis reader as redis-py sets one up, fed ``data`` at the first socket read."""

    def __init__(self, data: bytes) -> None:
        self._reader = hiredis.Reader(
            replyError=BaseParser.parse_error, notEnoughData=NOT_ENOUGH_DATA
        )
        self._data = [data]

    async def read_from_socket(self) -> None:
        self._reader.feed(self._data.pop(0))


class _Connection:
    def __init__(self, data: bytes) -> None:
        self._parser = _Parser(data)


class _Patience:
    def renew(self) -> None:
        pass


def test_a_loading_server_fails_the_pipeline_and_a_refusal_is_a_reply() -> None:
    """
    ``LOADING`` among the replies raises (redis-py's connection error: the
    writer sends the pipeline again); any other error is that command's reply.
    """

    async def main(data: bytes, count: int) -> list[Any]:
        return await _read(_Connection(data), count, _Patience())  # type: ignore[arg-type]

    replies = asyncio.run(main(b"$3\r\n1-1\r\n-READONLY You can't write\r\n:7\r\n", 3))
    assert replies[0] == b"1-1" and replies[2] == 7
    assert isinstance(replies[1], ReadOnlyError)
    with pytest.raises(BusyLoadingError):
        asyncio.run(main(b"$3\r\n1-1\r\n-LOADING Redis is loading\r\n:7\r\n", 3))
