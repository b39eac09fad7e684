"""
``--engine-wait-replicas`` through a failover (stompbroker.broker.engine.redis.writer,
``replicas``): a write whose ``WAIT`` came back short is held with its RECEIPT, confirmed by a
later ``WAIT`` over the same connection, sent again (marked redelivered) over a new one, and
answered ERROR ``message not replicated`` only past ``--engine-outage-hold``; a server that
answers as a replica counts as the primary having moved; writes wait while a replica is promoted.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

pytest.importorskip("redis")

from redis.exceptions import ResponseError  # noqa: E402

from stompbroker.broker.engine.redis import writer as writer_module  # noqa: E402
from stompbroker.broker.engine.redis.clients import Connects  # noqa: E402
from stompbroker.broker.engine.redis.codec import decode, encode  # noqa: E402
from stompbroker.broker.engine.redis.connection import (  # noqa: E402
    Durability,
    NotReplicated,
    Writer,
)
from stompbroker.broker.engine.redis.outage import OUTAGE, Outage  # noqa: E402
from stompbroker.protocol.message import Message  # noqa: E402


class LoopClock:
    """The ``seconds``/``callLater`` an :class:`Outage` needs, on the running asyncio loop."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop

    def seconds(self) -> float:
        return self._loop.time()

    def callLater(self, delay: float, call: Callable[[], None]) -> Any:  # noqa: N802
        return _Timer(self._loop.call_later(delay, call))


class _Timer:
    def __init__(self, handle: asyncio.TimerHandle) -> None:
        self._handle = handle

    def active(self) -> bool:
        return not self._handle.cancelled()

    def cancel(self) -> None:
        self._handle.cancel()


class Alarm:
    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []

    def alarm_on(self, reason: str) -> None:
        self.calls.append(("on", reason))

    def alarm_off(self, reason: str) -> None:
        self.calls.append(("off", reason))


class Pool:
    """Stands for the writer's connection pool: counts connections through ``connects``."""

    def __init__(self, connects: Connects) -> None:
        self.connects = connects
        self.connected = False
        self.dropped = 0

    async def get_connection(self) -> Pool:
        if not self.connected:
            self.connected = True
            self.connects.count += 1
        return self

    async def release(self, connection: Any) -> None:
        return None

    async def disconnect(self) -> None:
        self.connected = False
        self.dropped += 1


class Client:
    """Records each pipeline; ``answer(command)`` gives each command's reply."""

    #: No reply is reshaped (:func:`~stompbroker.broker.engine.redis.wire.shaped`).
    response_callbacks: dict[str, Any] = {}

    def __init__(self, answer: Callable[[tuple[Any, ...]], Any]) -> None:
        self.connects = Connects()
        self.connection_pool = Pool(self.connects)
        self.sent: list[list[tuple[Any, ...]]] = []
        self.answer = answer


async def _execute(client: Client, commands: Any, count: int, timeout: float) -> list[Any]:
    """Stands for :func:`~stompbroker.broker.engine.redis.wire.execute` over ``client``."""
    pool = client.connection_pool
    await pool.get_connection()
    await asyncio.sleep(0.001)  # a round trip: the loop runs others meanwhile
    if not pool.connected:
        raise ConnectionError("dropped while the pipeline was in flight")
    client.sent.append(list(commands))
    return [client.answer(args) for args in commands]


@pytest.fixture(autouse=True)
def _fake_wire(monkeypatch: pytest.MonkeyPatch) -> None:
    """The writer's pipelines go to :class:`Client` as their commands, unpacked."""
    monkeypatch.setattr(writer_module, "wire_pack", lambda commands: commands)
    monkeypatch.setattr(writer_module, "execute", _execute)


def _payload(body: bytes) -> bytes:
    return encode("n1", Message("/queue/q", "n-1", (), body, 0.0, 0, True))


def _writer(client: Client, hold: float, loop: asyncio.AbstractEventLoop) -> tuple[Writer, Alarm]:
    outage = Outage(LoopClock(loop), hold)
    alarm = Alarm()
    outage.watch(alarm)
    writer = Writer(
        client,  # type: ignore[arg-type]
        loop,
        outage=outage,
        durability=Durability(replicas=1, timeout=0.05),
        connects=client.connects,
    )
    return writer, alarm


def _replicas(counts: list[int]) -> Callable[[tuple[Any, ...]], Any]:
    """WAIT answers the next of ``counts`` (the last one for ever); other commands b"1-0"."""

    def answer(args: tuple[Any, ...]) -> Any:
        if args[0] != "WAIT":
            return b"1-0"
        return counts.pop(0) if len(counts) > 1 else counts[0]

    return answer


async def _until(condition: Callable[[], bool], seconds: float = 2.0) -> None:
    for _ in range(int(seconds / 0.01)):
        if condition():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("not in time")


def test_a_short_wait_holds_the_receipt_until_a_later_wait_confirms_it() -> None:
    """No ERROR for a WAIT short of replicas: the RECEIPT and the publishers wait, then go."""
    client = Client(_replicas([0, 0, 1]))
    outcomes: list[Any] = []

    async def main() -> Alarm:
        writer, alarm = _writer(client, 30, asyncio.get_running_loop())
        writer.command_waited("XADD", "q", "*", "m", _payload(b"a"), replicated=True).addBoth(
            outcomes.append
        )
        await writer.drained()
        return alarm

    alarm = asyncio.run(main())
    assert outcomes == [b"1-0"]
    # The write went once; the later pipelines were WAITs alone over the same connection.
    assert [args[0] for args in client.sent[0]] == ["XADD", "WAIT"]
    assert all(pipeline == [("WAIT", 1, 50)] for pipeline in client.sent[1:])
    assert alarm.calls == [("on", OUTAGE), ("off", OUTAGE)]


def test_a_held_write_goes_again_marked_redelivered_over_a_new_connection() -> None:
    """The connection changed (the primary moved): the held XADD is sent again, marked."""
    replicas = [0]
    client = Client(lambda args: replicas[0] if args[0] == "WAIT" else b"1-0")
    outcomes: list[Any] = []

    async def main() -> None:
        writer, _ = _writer(client, 30, asyncio.get_running_loop())
        writer.command_waited("XADD", "q", "*", "m", _payload(b"a"), replicated=True).addBoth(
            outcomes.append
        )
        await _until(lambda: bool(writer.replicas.held))
        await client.connection_pool.disconnect()
        replicas[0] = 1
        writer.command_waited("XADD", "q", "*", "m", _payload(b"b"), replicated=True).addBoth(
            outcomes.append
        )
        await writer.drained()

    asyncio.run(main())
    assert outcomes == [b"1-0", b"1-0"]
    sent = [
        decode(args[4])[1] for pipeline in client.sent for args in pipeline if args[0] == "XADD"
    ]
    assert [(message.body, message.redeliveries) for message in sent if message.body == b"a"] == [
        (b"a", 0),
        (b"a", 1),
    ]
    assert [message.redeliveries for message in sent if message.body == b"b"] == [0]


def test_past_the_hold_a_held_receipt_becomes_message_not_replicated() -> None:
    """Replicas that never confirm: the RECEIPT waits the hold out, then an ERROR says so."""
    client = Client(_replicas([0]))
    outcomes: list[Any] = []

    async def main() -> None:
        writer, _ = _writer(client, 0.3, asyncio.get_running_loop())
        waiter = writer.command_waited("XADD", "q", "*", "m", _payload(b"a"), replicated=True)
        waiter.addErrback(lambda failure: outcomes.append(failure.value))
        await asyncio.sleep(0.15)
        assert outcomes == []
        await writer.drained()

    asyncio.run(main())
    (error,) = outcomes
    assert isinstance(error, NotReplicated)
    assert "longer than --engine-outage-hold" in error.detail


def test_a_hold_of_zero_answers_at_once() -> None:
    """``--engine-outage-hold 0`` keeps the old promise: a short WAIT is an ERROR at once."""
    client = Client(_replicas([0]))
    outcomes: list[Any] = []

    async def main() -> None:
        writer, _ = _writer(client, 0, asyncio.get_running_loop())
        writer.command_waited("XADD", "q", "*", "m", _payload(b"a"), replicated=True).addErrback(
            lambda failure: outcomes.append(failure.value)
        )
        await writer.drained()

    asyncio.run(main())
    assert [type(error) for error in outcomes] == [NotReplicated]
    assert len(client.sent) == 1


def test_a_server_that_answers_as_a_replica_means_the_primary_moved() -> None:
    """WAIT refused by a replica: the connection is dropped, the pipeline sent again, no ERROR."""
    replica = ResponseError("WAIT cannot be used with replica instances")
    replies = iter([replica])

    def answer(args: tuple[Any, ...]) -> Any:
        return next(replies, 1) if args[0] == "WAIT" else b"1-0"

    client = Client(answer)
    outcomes: list[Any] = []

    async def main() -> None:
        writer, _ = _writer(client, 30, asyncio.get_running_loop())
        writer.command_waited("XADD", "q", "*", "m", _payload(b"a"), replicated=True).addBoth(
            outcomes.append
        )
        await writer.drained()

    asyncio.run(main())
    assert outcomes == [b"1-0"]
    assert client.connection_pool.dropped == 1
    assert decode(client.sent[1][0][4])[1].redeliveries == 1


def test_writes_wait_while_a_replica_is_promoted() -> None:
    """Between the promotion's start and the switch nothing is sent to the old primary."""
    client = Client(lambda args: b"1-0")
    outcomes: list[Any] = []

    async def main() -> None:
        writer, _ = _writer(client, 30, asyncio.get_running_loop())
        writer.pause(True)
        writer.command_waited("XADD", "q", "*", "m", _payload(b"a")).addBoth(outcomes.append)
        await asyncio.sleep(0.05)
        assert client.sent == [] and outcomes == [] and not writer.connected
        writer.primary_moved()
        await writer.drained()
        assert writer.connected

    asyncio.run(main())
    assert outcomes == [b"1-0"]
    assert [args[0] for args in client.sent[0]] == ["PING", "XADD", "PING"]
