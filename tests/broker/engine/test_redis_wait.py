"""
``--engine-wait-replicas``: a pipeline that carries a receipted write ends with one
``WAIT``, and its receipted waiters fire only if enough replicas confirmed.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

pytest.importorskip("redis")

import hiredis  # noqa: E402
from redis import asyncio as aioredis  # noqa: E402

from stompbroker.broker.engine.redis import writer as writer_module  # noqa: E402
from stompbroker.broker.engine.redis.connection import (  # noqa: E402
    Durability,
    NotReplicated,
    Writer,
)


class _Client:
    """Records the commands of each pipeline; answers WAIT with the replicas given."""

    def __init__(self, replicas: int) -> None:
        self.sent: list[list[Any]] = []
        self.replicas = replicas

    async def execute(self, client: Any, packed: bytes, count: int, timeout: float) -> list[Any]:
        reader = hiredis.Reader()
        reader.feed(packed)
        commands = [tuple(reader.gets()) for _ in range(count)]
        commands = [(args[0].decode(), *args[1:]) for args in commands]
        self.sent.append(commands)
        return [self.replicas if args[0] == "WAIT" else b"1-0" for args in commands]


def _send(durability: Durability, replicas: int) -> tuple[_Client, list[Any]]:
    """Two receipted XADDs and a plain read in one turn; :returns: the client and outcomes."""
    client = _Client(replicas)
    outcomes: list[Any] = []

    async def main() -> None:
        writer = Writer(aioredis.Redis(), asyncio.get_running_loop(), durability=durability)
        waiters = [
            writer.command_waited("XADD", "q", "*", "m", b"a", replicated=True),
            writer.command_waited("XADD", "q", "*", "m", b"b", replicated=True),
            writer.command_waited("HGETALL", "h"),
        ]
        for waiter in waiters:
            waiter.addBoth(outcomes.append)
        await writer.drained()

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(writer_module, "execute", client.execute)
        asyncio.run(main())
    return client, outcomes


def test_one_wait_per_pipeline_and_the_receipts_fire_once_the_replicas_have_it() -> None:
    client, outcomes = _send(Durability(replicas=1, timeout=0.5), replicas=1)
    (pipeline,) = client.sent
    assert pipeline[-1] == ("WAIT", b"1", b"500")
    assert [args[0] for args in pipeline].count("WAIT") == 1
    assert outcomes == [b"1-0", b"1-0", b"1-0"]


def test_too_few_replicas_fail_the_receipted_writes_only() -> None:
    _, outcomes = _send(Durability(replicas=2, timeout=1), replicas=1)
    assert [type(outcome.value) for outcome in outcomes[:2]] == [NotReplicated, NotReplicated]
    assert "2 of its replicas did not confirm it within 1 s (1 did" in outcomes[0].value.detail
    assert outcomes[2] == b"1-0"


def test_no_wait_without_replicas_asked() -> None:
    client, outcomes = _send(Durability(), replicas=0)
    assert all(args[0] != "WAIT" for args in client.sent[0])
    assert outcomes == [b"1-0", b"1-0", b"1-0"]
