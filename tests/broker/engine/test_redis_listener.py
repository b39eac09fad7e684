"""The pub/sub listener fanning out what other nodes publish (engine.redis.listener)."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import pytest

from stompbroker.broker.engine.redis.codec import encode, pack_batch
from stompbroker.broker.engine.redis.listener import alone, listen
from stompbroker.protocol.message import Message
from stompbroker.transport.coalesce import CoalescedWrite, WriteCoalescer

TOPICS = b"p:t:*"


class OnePubSub:
    """A subscribed pub/sub connection that brings ``responses``, then is cancelled."""

    def __init__(self, responses: list[list[bytes]]) -> None:
        self._responses = list(responses)

    async def parse_response(self, block: bool) -> list[bytes]:
        if not self._responses:
            raise asyncio.CancelledError
        return self._responses.pop(0)


def engine_with(fan_out: Any, together: Any) -> Any:
    """:returns: what :func:`listen` reads of a redis engine, with this fan-out."""
    return SimpleNamespace(
        ids=SimpleNamespace(node="B"),
        names=SimpleNamespace(streams="p:sc:*", control="p:c"),
        fanout=SimpleNamespace(publish=fan_out),
        resumes=None,
        traffic=SimpleNamespace(destinations={}),
        channels={},
        deliver_together=together,
    )


def batch(origin: str, count: int) -> bytes:
    """:returns: a pub/sub payload of ``count`` messages to ``/topic/a`` from node ``origin``."""
    messages = [Message("/topic/a", f"m-{n}", (), b"body %d" % n) for n in range(count)]
    return pack_batch(origin, [encode(origin, message) for message in messages])


def run(engine: Any, *payloads: bytes) -> None:
    responses = [[b"pmessage", TOPICS, b"p:t:/topic/a", payload] for payload in payloads]
    with pytest.raises(asyncio.CancelledError):
        asyncio.run(listen(engine, OnePubSub(responses)))


def test_each_connection_gets_a_batch_in_one_write() -> None:
    """Two subscribers, a batch of three: one write each, with the frames in order."""
    coalescer = WriteCoalescer()
    written: dict[str, list[bytes]] = {"x": [], "y": []}
    writers = [CoalescedWrite(written[name].append, coalescer) for name in written]

    def fan_out(message: Message) -> None:
        for write in writers:
            write(message.body + b";")

    run(engine_with(fan_out, coalescer.handle), batch("A", 3))
    assert written == {"x": [b"body 0;body 1;body 2;"], "y": [b"body 0;body 1;body 2;"]}


def test_alone_fans_out_each_message_as_it_comes() -> None:
    """Without the transports' coalescer, the batch's messages still all arrive, in order."""
    seen: list[str] = []
    run(engine_with(lambda message: seen.append(message.message_id), alone), batch("A", 3))
    assert seen == ["m-0", "m-1", "m-2"]


def test_the_nodes_own_batches_are_not_fanned_out_again() -> None:
    """A batch this node published comes back on the pattern: it was fanned out here already."""
    seen: list[str] = []
    engine = engine_with(lambda message: seen.append(message.message_id), alone)
    run(engine, batch("B", 2), batch("A", 1))
    assert seen == ["m-0"]
