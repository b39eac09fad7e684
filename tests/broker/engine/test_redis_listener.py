"""The pub/sub listener fanning out what other nodes publish (engine.redis.listener)."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import pytest
from twisted.logger import formatEvent

from stompbroker.broker.engine.redis.codec import encode
from stompbroker.broker.engine.redis.listener import Unreadable, alone, listen, pushed
from stompbroker.broker.engine.redis.topic_batches import batch_head, encode_message, pack
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


def subscribed(destination: str) -> tuple[str, ...]:
    """The subscription tree of the node: someone subscribes to ``/topic/a`` only."""
    return ("subscriber",) if destination == "/topic/a" else ()


def engine_with(fan_out: Any, together: Any) -> Any:
    """:returns: what :func:`listen` reads of a redis engine, with this fan-out."""
    return SimpleNamespace(
        ids=SimpleNamespace(node="B"),
        names=SimpleNamespace(streams="p:sc:*", control="p:c"),
        fanout=SimpleNamespace(publish=fan_out, tree=SimpleNamespace(match=subscribed)),
        resumes=None,
        traffic=SimpleNamespace(destinations={}),
        channels={},
        deliver_together=together,
    )


def batch(origin: str, count: int, destination: str = "/topic/a") -> bytes:
    """:returns: a pub/sub payload of ``count`` messages to ``destination`` from node ``origin``."""
    messages = [Message(destination, f"m-{n}", (), b"body %d" % n) for n in range(count)]
    return pack(batch_head(origin), destination, [encode_message(message) for message in messages])


def run(engine: Any, *payloads: bytes) -> Unreadable:
    """Listen until ``payloads`` are handled; :returns: what counted the unreadable ones."""
    responses = [[b"pmessage", TOPICS, b"p:t:/topic/a", payload] for payload in payloads]
    unreadable = Unreadable()
    with pytest.raises(asyncio.CancelledError):
        asyncio.run(listen(engine, OnePubSub(responses), unreadable))
    return unreadable


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


def test_a_batch_nobody_here_subscribes_to_is_dropped_undecoded() -> None:
    """A batch for a destination without a subscriber on this node is skipped; the next comes."""
    seen: list[str] = []
    engine = engine_with(lambda message: seen.append(message.destination), alone)
    unreadable = run(engine, batch("A", 2, "/topic/elsewhere"), batch("A", 1))
    assert seen == ["/topic/a"]
    assert unreadable.count == 0


def json_batch(origin: str) -> bytes:
    """:returns: a batch as nodes of the version before the binary form published it."""
    payload = encode(origin, Message("/topic/a", "old-1", (), b"old"))
    return b"B" + origin.encode() + b"\n" + len(payload).to_bytes(4, "big") + payload


def test_batches_it_cannot_read_are_counted_and_logged_once_per_node(
    log_events: list[dict[str, Any]],
) -> None:
    """
    An older node's JSON batch, a batch of an unknown version, a damaged one and
    garbage are dropped and counted; each node is logged once; the listener goes on.
    """
    seen: list[str] = []
    engine = engine_with(lambda message: seen.append(message.message_id), alone)
    unknown = b"T\x09" + batch_head("D")[2:] + b"whatever"
    unreadable = run(
        engine,
        json_batch("C"),
        json_batch("C"),
        unknown,
        batch("A", 2)[:-3],
        b"hello",
        batch("A", 1),
    )
    assert seen == ["m-0"]
    assert unreadable.count == 5
    logged = [formatEvent(event) for event in log_events if "dropped" in formatEvent(event)]
    assert len(logged) == 4
    assert "JSON form" in logged[0] and "node C" in logged[0]
    assert "format version 9" in logged[1] and "node D" in logged[1]
    assert "damaged" in logged[2] and "node A" in logged[2]
    assert "not a topic batch" in logged[3] and "node unknown" in logged[3]


def test_pushed_messages_are_handed_on_as_they_are() -> None:
    """The pub/sub push handler returns what Redis pushed, unchanged (no formatting)."""
    response = [b"pmessage", TOPICS, b"p:t:/topic/a", b"x" * 100]
    assert asyncio.run(pushed(response)) is response
