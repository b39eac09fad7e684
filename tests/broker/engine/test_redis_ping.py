"""
Whether Redis answers (stompbroker.broker.engine.redis.ping): a slow pipeline is
waited for while a ``PING`` on the side is answered, and ends as a timeout once
one is not.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

pytest.importorskip("redis")

from redis.exceptions import ConnectionError, ResponseError  # noqa: E402
from redis.exceptions import TimeoutError as RedisTimeout  # noqa: E402

from stompbroker.broker.engine.redis.ping import answers, watched  # noqa: E402


class Side:
    """A side connection that answers each PING as told: a reply, an error, or never."""

    def __init__(self, answer: Any = b"PONG") -> None:
        self.answer = answer
        self.pings = 0

    async def ping(self) -> Any:
        self.pings += 1
        if self.answer is None:
            await asyncio.Event().wait()
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer


def run(side: Side, timeout: float = 0.05) -> bool:
    async def main() -> bool:
        return await answers(side, timeout)  # type: ignore[arg-type]

    return asyncio.run(main())


def test_a_pong_and_an_error_reply_are_answers() -> None:
    """BUSY (a long script) or any error reply says Redis is there."""
    assert run(Side())
    assert run(Side(ResponseError("BUSY Redis is busy running a script")))


def test_silence_and_a_dead_connection_are_not() -> None:
    """No reply within the timeout, or the connection refused: Redis is away."""
    assert not run(Side(None))
    assert not run(Side(ConnectionError("Connection refused")))


def test_a_slow_pipeline_is_waited_for_while_redis_answers_pings() -> None:
    """Replies that take many times the patience still come: load is not an outage."""
    side = Side()

    async def main() -> str:
        async def slow() -> str:
            await asyncio.sleep(0.2)
            return "replies"

        work = asyncio.ensure_future(slow())
        return await watched(work, side, 0.05, patience=0.02)  # type: ignore[arg-type]

    assert asyncio.run(main()) == "replies"
    assert side.pings >= 2


def test_an_unanswered_ping_ends_the_pipeline_as_a_timeout() -> None:
    """Redis silent on the side too: the pipeline is cancelled and Redis counts as away."""
    side = Side(None)
    cancelled: list[bool] = []

    async def main() -> None:
        async def stuck() -> None:
            try:
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                cancelled.append(True)
                raise

        work = asyncio.ensure_future(stuck())
        await watched(work, side, 0.05, patience=0.02)  # type: ignore[arg-type]

    with pytest.raises(RedisTimeout, match="did not answer a PING within 0.05 s"):
        asyncio.run(main())
    assert cancelled == [True]


def test_a_quick_pipeline_pings_nothing() -> None:
    """Replies within the patience cost no PING."""
    side = Side()

    async def main() -> int:
        async def quick() -> int:
            return 7

        return await watched(asyncio.ensure_future(quick()), side, 1.0)  # type: ignore[arg-type]

    assert asyncio.run(main()) == 7 and side.pings == 0
