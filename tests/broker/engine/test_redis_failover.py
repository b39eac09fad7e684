"""
Following a Sentinel failover (stompbroker.broker.engine.redis.failover, ``clients``): what
``+switch-master`` and the promotion's start say, which primary the Sentinels' newest
configuration names, and what a switch does to the node's clients.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

pytest.importorskip("redis")

from redis.asyncio.sentinel import MasterNotFoundError  # noqa: E402
from redis.exceptions import ConnectionError  # noqa: E402

from stompbroker.broker.engine.redis.clients import NewestSentinel  # noqa: E402
from stompbroker.broker.engine.redis.failover import (  # noqa: E402
    FailoverWatch,
    promoting,
    switched_to,
)
from stompbroker.broker.engine.redis.url import parse_engine  # noqa: E402

URL = parse_engine("redis+sentinel://127.0.0.1:26379,127.0.0.1:26380/mymaster/0")


def test_switch_master_names_the_new_primary_of_its_master_only() -> None:
    """``+switch-master <name> <old ip> <old port> <new ip> <new port>`` (Redis Sentinel docs)."""
    assert switched_to(b"mymaster 10.0.0.1 6379 10.0.0.2 6380", "mymaster") == ("10.0.0.2", 6380)
    assert switched_to(b"other 10.0.0.1 6379 10.0.0.2 6380", "mymaster") is None
    assert switched_to(b"mymaster 10.0.0.1 6379", "mymaster") is None
    assert switched_to(b"mymaster 10.0.0.1 6379 10.0.0.2 port", "mymaster") is None


def test_the_promotion_of_a_replica_is_told_by_its_master_name() -> None:
    """``+failover-state-send-slaveof-noone`` carries the instance, then ``@`` and the master."""
    event = b"slave 10.0.0.2:6380 10.0.0.2 6380 @ mymaster 10.0.0.1 6379"
    assert promoting(event, "mymaster")
    assert not promoting(event, "other")
    assert not promoting(b"master mymaster 10.0.0.1 6379", "mymaster")


class _Sentinel:
    """Answers ``SENTINEL MASTERS`` with a state, an error, or late."""

    def __init__(self, answer: Any, delay: float = 0.0) -> None:
        self.answer = answer
        self.delay = delay

    async def sentinel_masters(self) -> Any:
        await asyncio.sleep(self.delay)
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer


def _state(port: int, epoch: int, **flags: Any) -> dict[str, Any]:
    state = {
        "ip": "127.0.0.1",
        "port": port,
        "config-epoch": epoch,
        "is_master": True,
        "is_sdown": False,
        "is_odown": False,
        "num-other-sentinels": 2,
    }
    state.update(flags)
    return {"mymaster": state}


def _discover(*sentinels: _Sentinel) -> Any:
    manager = NewestSentinel([])
    manager.sentinels = list(sentinels)  # type: ignore[arg-type]
    return asyncio.run(manager.discover_master("mymaster"))


def test_the_newest_configuration_wins_over_a_sentinel_that_has_not_heard_of_the_failover() -> None:
    """Right after a switch one Sentinel still names the old primary: its epoch is older."""
    assert _discover(_Sentinel(_state(6379, 1)), _Sentinel(_state(6380, 2))) == ("127.0.0.1", 6380)


def test_a_sentinel_that_is_down_or_slow_does_not_keep_the_answer() -> None:
    """An error is skipped; one that answers after the short wait is not waited for."""
    assert _discover(
        _Sentinel(ConnectionError("refused")),
        _Sentinel(_state(6380, 2)),
        _Sentinel(_state(6379, 3), delay=5),
    ) == ("127.0.0.1", 6380)


def test_no_sentinel_naming_a_primary_that_is_up_is_an_error() -> None:
    """A primary the Sentinels see as down is no answer (redis-py's own rule)."""
    with pytest.raises(MasterNotFoundError):
        _discover(_Sentinel(_state(6379, 1, is_sdown=True)), _Sentinel(ConnectionError("x")))


class _Pool:
    def __init__(self) -> None:
        self.dropped = 0

    async def disconnect(self) -> None:
        self.dropped += 1


class _Client:
    def __init__(self) -> None:
        self.connection_pool = _Pool()


def test_a_switch_drops_every_client_once_per_new_primary_and_ends_the_pause() -> None:
    """Each Sentinel announces the switch: the node follows the first, then ignores the rest."""
    clients = [_Client(), _Client(), _Client()]
    calls: list[Any] = []

    async def main() -> None:
        assert URL is not None
        watch = FailoverWatch(
            URL,
            asyncio.get_running_loop(),
            clients,  # type: ignore[arg-type]
            lambda: calls.append("moved"),
            lambda paused: calls.append(("pause", paused)),
        )
        watch.primary = ("127.0.0.1", 6379)
        watch._promoting()
        watch._promoting()
        for _ in range(3):
            await watch._switch(("127.0.0.1", 6380))
        assert watch.switches == 1 and watch.primary == ("127.0.0.1", 6380)
        await watch.close()

    asyncio.run(main())
    assert [client.connection_pool.dropped for client in clients] == [1, 1, 1]
    # The pause ended with the switch, not by its time limit.
    assert calls == [("pause", True), "moved"]
