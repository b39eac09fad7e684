"""
The writer's bound (stompbroker.broker.engine.redis.writer with .busy): what waits
for a slow pipeline is counted, publishers are paused past the high mark and read
again once the pipelines catch up; past an outage's hold they are told, not held.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

pytest.importorskip("redis")

from redis import asyncio as aioredis  # noqa: E402
from twisted.internet.task import Clock  # noqa: E402

from stompbroker.broker.engine.redis import writer as writer_module  # noqa: E402
from stompbroker.broker.engine.redis.busy import BUSY, Busy  # noqa: E402
from stompbroker.broker.engine.redis.outage import Outage  # noqa: E402
from stompbroker.broker.engine.redis.writer import COMMAND_BYTES, Writer  # noqa: E402


class Alarm:
    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []

    def alarm_on(self, reason: str, loud: bool = True) -> None:
        self.calls.append(("on", reason))

    def alarm_off(self, reason: str) -> None:
        self.calls.append(("off", reason))


class SlowRedis:
    """Answers each pipeline only once :attr:`go` is set: a Redis that lags behind."""

    def __init__(self) -> None:
        self.go = asyncio.Event()
        self.pipelines = 0

    async def execute(self, client: Any, packed: bytes, count: int, timeout: Any) -> list[Any]:
        self.pipelines += 1
        await self.go.wait()
        return [b"1-0"] * count


def test_publishers_are_paused_while_a_slow_pipeline_keeps_too_much_waiting() -> None:
    """Over the mark: paused; the pipelines answered: read again; held_bytes says how much."""
    alarm = Alarm()
    busy = Busy(Clock(), high=10 * (100 + COMMAND_BYTES))
    busy.watch(alarm)
    redis = SlowRedis()
    seen: dict[str, Any] = {}

    async def main() -> None:
        writer = Writer(aioredis.Redis(), asyncio.get_running_loop(), busy=busy)
        writer.command("XADD", "q", "*", "m", b"x" * 100)
        await asyncio.sleep(0)  # the first pipeline is in flight, and stuck
        for _ in range(20):
            writer.command("XADD", "q", "*", "m", b"x" * 100)
        seen["held"] = writer.held_bytes()
        seen["on"] = busy.on
        redis.go.set()
        await writer.drained()
        seen["after"] = writer.held_bytes()

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(writer_module, "execute", redis.execute)
        asyncio.run(main())
    assert seen["held"] == 21 * (100 + COMMAND_BYTES)
    assert seen["on"] and alarm.calls == [("on", BUSY), ("off", BUSY)]
    assert seen["after"] == 0 and not busy.on


def test_past_an_outages_hold_the_bound_holds_nobody() -> None:
    """Redis away past the hold: publishers must hear the ERROR, so the bound lets them go."""
    alarm = Alarm()
    busy = Busy(Clock(), high=1000)
    busy.watch(alarm)
    clock = Clock()
    outage = Outage(clock, 0)

    async def main() -> None:
        writer = Writer(aioredis.Redis(), asyncio.get_running_loop(), outage=outage, busy=busy)
        writer.connected = False
        outage.began()
        for _ in range(50):
            writer.command("XADD", "q", "*", "m", b"x" * 100)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(writer_module, "execute", SlowRedis().execute)
        asyncio.run(main())
    assert outage.expired and not busy.on and alarm.calls == []
