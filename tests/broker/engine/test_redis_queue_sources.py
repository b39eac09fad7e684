"""
Where a shared queue's messages wait, for the management across nodes
(:mod:`stompbroker.broker.engine.redis.queue_sources`, the snapshot of
:mod:`~stompbroker.broker.engine.redis.control`, the :data:`MOVE` script of
:mod:`~stompbroker.broker.engine.redis.queue_moves`), and what a dead letter
adds to a byte-limited queue's count (:mod:`~stompbroker.broker.engine.redis.shared_bytes`,
:mod:`~stompbroker.broker.engine.redis.shared_limits`): on a real ``redis-server``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
import redis
import redis.asyncio

from stompbroker.broker.engine.redis import control
from stompbroker.broker.engine.redis.codec import Names, decode, encode
from stompbroker.broker.engine.redis.control import ControlChannel
from stompbroker.broker.engine.redis.figures_exchange import _destination
from stompbroker.broker.engine.redis.queue_actions import ClusterQueueActions
from stompbroker.broker.engine.redis.queue_moves import MOVE
from stompbroker.broker.engine.redis.queue_sources import (
    entry_order,
    find_sources,
    returned_stream,
)
from stompbroker.broker.engine.redis.shared_bytes import ADD_SIZED, byte_counter, recount_mark
from stompbroker.broker.engine.redis.shared_limits import ADD_DEAD_LETTERING
from stompbroker.protocol.message import Message
from tests.support.redis import RedisServer, redis_client, redis_server  # noqa: F401

QUEUE = "/queue/x"
NAMES = Names("p")
GROUP = NAMES.group


@pytest.fixture
def client(redis_client: redis.Redis) -> redis.Redis:  # noqa: F811
    return redis_client


class Engine:
    """What the sources and the snapshot read of the engine: names, ids, a client."""

    def __init__(self, port: int, loop: asyncio.AbstractEventLoop) -> None:
        self.names = NAMES
        self.ids = type("Ids", (), {"node": "me"})()
        self.client = redis.asyncio.Redis(port=port)
        self.queues: dict[str, Any] = {}
        self.loop = loop


def run_with_engine(server: RedisServer, job: Any) -> Any:
    async def main() -> Any:
        engine = Engine(server.port, asyncio.get_running_loop())
        try:
            return await job(engine)
        finally:
            await engine.client.aclose()

    return asyncio.run(main())


def payload(body: str, priority: int = 4, node: str = "n1") -> bytes:
    """:returns: an entry's payload (the priority travels as its header)."""
    headers = (("priority", str(priority)),)
    return encode(node, Message(QUEUE, f"id-{body}", headers, body.encode(), priority=priority))


def add(
    client: redis.Redis, stream: str, body: str, priority: int = 4, original: bytes = b""
) -> bytes:
    """Add an entry; ``original``: the id it first had in its lane (field ``i``), if moved."""
    fields = {"m": payload(body, priority)}
    if original:
        fields["i"] = original
    entry: bytes = client.xadd(stream, fields)  # type: ignore[arg-type]
    return entry


def lane(priority: int, queue: str = QUEUE) -> str:
    return NAMES.queue(queue) if priority == 4 else f"p:qp:{priority}:{queue}"


def own(node: str) -> str:
    return f"p:qn:{node}:{QUEUE}"


RETURNED = returned_stream("p", QUEUE)


@pytest.fixture
def spread(client: redis.Redis) -> Iterator[redis.Redis]:
    """
    ``/queue/x`` with entries in lanes 9, 4 and 0, one of lane 9's read by the
    live node ``live`` (not waiting, unless ``live`` says it read it ahead), and
    the own stream of the dead, registered node ``ghost`` holding a 9 and a 0.
    """
    for stream in (lane(9), lane(4), lane(0), own("ghost")):
        client.xgroup_create(stream, GROUP, id="0", mkstream=True)
    add(client, lane(9), "held-9")
    client.xreadgroup(GROUP, "live", {lane(9): ">"}, count=1)
    add(client, lane(9), "a-9")
    add(client, lane(9), "b-9")
    add(client, lane(4), "c-4")
    last = add(client, lane(0), "d-0")
    # Moved there by a deciding node: own-9 from before a-9 in lane 9, own-0 from after d-0.
    add(client, own("ghost"), "own-9", 9, b"0-1")
    millis, _, sequence = last.partition(b"-")
    add(client, own("ghost"), "own-0", 0, millis + b"-" + str(int(sequence) + 1).encode())
    client.hset(f"p:qc:{QUEUE}", "ghost/1", "[]")
    client.set(NAMES.alive("live"), "1")
    yield client


def test_the_sources_are_the_lanes_found_then_the_registered_nodes_own_streams(
    spread: redis.Redis,
    redis_server: RedisServer,  # noqa: F811
) -> None:
    found = run_with_engine(redis_server, lambda engine: find_sources(engine, QUEUE))
    assert [source.stream for source in found.lanes] == [lane(9), lane(4), lane(0)]
    assert [source.priority for source in found.lanes] == [9, 4, 0]
    assert [(source.stream, source.owner) for source in found.own] == [(own("ghost"), "ghost")]
    assert found.others == frozenset({"live"})
    assert found.dead == ("ghost",)


def test_a_snapshot_is_in_one_node_order_and_names_a_node_that_did_not_answer(
    spread: redis.Redis,
    redis_server: RedisServer,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """
    Highest priority first; within one, in the queue's order, the entries a
    node's own stream holds among the lane's by the id each first had there
    (field ``i``); ``live`` does not answer, so what it read is
    not shown and it is named.
    """
    monkeypatch.setattr(control, "ANSWER_TIMEOUT", 0.1)

    async def snapshot(engine: Engine) -> Any:
        return await ControlChannel(engine).snapshot(QUEUE)

    taken = run_with_engine(redis_server, snapshot)
    bodies = [message.body.decode() for message in taken.waiting.messages]
    assert bodies == ["own-9", "a-9", "b-9", "c-4", "d-0", "own-0"]
    assert taken.waiting.missing == ("live",)
    assert [stream for stream, _ in taken.entries] == [
        own("ghost"),
        lane(9),
        lane(9),
        lane(4),
        lane(0),
        own("ghost"),
    ]

    async def first_two(engine: Engine) -> Any:
        return await ControlChannel(engine).snapshot(QUEUE, 2)

    bodies = [m.body.decode() for m in run_with_engine(redis_server, first_two).waiting.messages]
    assert bodies[:2] == ["own-9", "a-9"]
    assert "c-4" not in bodies and "d-0" not in bodies


def move_args(dead: list[str], entries: list[tuple[bytes, str, str, str]]) -> list[Any]:
    """MOVE's ARGV: per entry its id, the target lane of priority 9 of ``/queue/t``."""
    args: list[Any] = [GROUP, len(dead), *dead]
    target = lane(9, "/queue/t")
    for entry_id, sized, marks, body in entries:
        args += [entry_id, target, byte_counter("p", target), sized, "p:qm:/queue/t", marks]
        args.append(payload(body, 9))
    return args


def test_a_grouped_message_moved_to_a_queue_marks_it_with_its_switch_point(
    client: redis.Redis,
) -> None:
    """Field ``g`` and, the first time, ``gs``: the id of the target stream's newest entry."""
    source = lane(9)
    client.xadd(lane(4, "/queue/t"), {"m": b"waiting"}, id="5-0")
    entry_id = client.xadd(source, {"m": payload("g", 9)})
    args = move_args([], [(entry_id, "0", "pg", "g1")])
    assert client.eval(MOVE, 2, source, byte_counter("p", source), *args) == [entry_id]
    assert client.hmget("p:qm:/queue/t", "p", "g", "gs") == [b"1", b"1", b"5-0"]


def test_move_skips_a_live_nodes_entry_and_keeps_the_priority_and_the_bytes(
    spread: redis.Redis,
) -> None:
    client = spread
    entries = [entry_id for entry_id, _ in client.xrange(lane(9))]
    source_counter = byte_counter("p", lane(9))
    client.set(source_counter, 16)
    args = move_args([], [(entry_id, "1", "p", f"t{i}") for i, entry_id in enumerate(entries)])
    moved = client.eval(MOVE, 2, lane(9), source_counter, *args)
    assert moved == entries[1:]
    target = lane(9, "/queue/t")
    assert [decode(f[b"m"])[1].body for _, f in client.xrange(target)] == [b"t1", b"t2"]
    assert int(client.get(byte_counter("p", target)) or 0) == 4
    assert client.hget("p:qm:/queue/t", "p") == b"1"
    assert int(client.get(source_counter) or 0) == 12
    # Held by a dead node: moved, and its pending entry acknowledged.
    args = move_args(["live"], [(entries[0], "0", "p", "t0")])
    assert client.eval(MOVE, 2, lane(9), source_counter, *args) == [entries[0]]
    assert client.xlen(lane(9)) == 0
    assert int(client.xpending(lane(9), GROUP)["pending"]) == 0
    assert int(client.get(byte_counter("p", target)) or 0) == 6


def test_move_into_an_empty_byte_limited_lane_starts_its_count_afresh(
    client: redis.Redis,
) -> None:
    """A stale count of an empty target is not added to: it becomes the moved body's size."""
    add(client, lane(9), "abc", 9)
    target = lane(9, "/queue/t")
    client.set(byte_counter("p", target), 1000)
    [(entry_id, _)] = client.xrange(lane(9))
    args = move_args([], [(entry_id, "1", "", "abcd")])
    client.eval(MOVE, 2, lane(9), byte_counter("p", lane(9)), *args)
    assert int(client.get(byte_counter("p", target)) or 0) == 4


def test_add_sized_keep_adds_over_the_limit_and_counts_it(client: redis.Redis) -> None:
    """A dead letter under ``reject-publish``: added over the limit, never refused, counted."""
    stream = lane(4)
    for index, body in enumerate((b"abcdef", b"ghijkl")):
        reply = client.eval(
            ADD_SIZED,
            5,
            stream,
            byte_counter("p", stream),
            recount_mark("p", stream),
            stream,
            byte_counter("p", stream),
            10,
            -1,
            "keep",
            payload(body.decode()),
            len(body),
            "",
            f"dl-{index}",
            "maxlen",
        )
        assert reply == [1, 0]
    assert client.xlen(stream) == 2
    assert int(client.get(byte_counter("p", stream)) or 0) == 12


def test_max_length_dead_lettering_counts_into_the_dead_letter_queues_bytes(
    client: redis.Redis,
) -> None:
    stream, dead = lane(4), NAMES.queue("/queue/DLQ.x")
    client.set(byte_counter("p", dead), 0)
    for body in ("aa", "bbb", "cccc"):
        client.eval(
            ADD_DEAD_LETTERING,
            3,
            stream,
            dead,
            byte_counter("p", dead),
            2,
            payload(body),
            "/queue/DLQ.x",
            "dl-1",
            "maxlen",
        )
    assert client.xlen(dead) == 1
    assert int(client.get(byte_counter("p", dead)) or 0) == 2


def test_entry_order_sorts_as_redis_does() -> None:
    assert sorted([b"10-0", b"9-5", b"9-10"], key=entry_order) == [b"9-5", b"9-10", b"10-0"]


def test_the_figures_count_a_lane_and_a_nodes_own_stream_under_their_queue() -> None:
    assert _destination(NAMES, "p:qp:7:/queue/x") == "/queue/x"
    assert _destination(NAMES, "p:qn:ab12cd34:/queue/a:b") == "/queue/a:b"
    assert _destination(NAMES, "p:q:/queue/x") == "/queue/x"
    assert _destination(NAMES, "p:qret:/queue/a:b") == "/queue/a:b"


@pytest.fixture
def returned(client: redis.Redis) -> Iterator[redis.Redis]:
    """
    A grouped ``/queue/x``: lane 9 and lane 4 hold one entry each, added before
    what consumers that left gave back to its returned stream: a 0, a 9 and a
    4, the first read by the deciding node ``decider`` (live, and answering
    that it holds nothing read ahead: it handed it out).
    """
    for stream in (lane(9), lane(4), RETURNED):
        client.xgroup_create(stream, GROUP, id="0", mkstream=True)
    add(client, lane(9), "lane-9", 9)
    add(client, lane(4), "lane-4")
    add(client, RETURNED, "held-0", 0)
    client.xreadgroup(GROUP, "decider", {RETURNED: ">"}, count=1)
    add(client, RETURNED, "back-0", 0)
    add(client, RETURNED, "back-9", 9)
    add(client, RETURNED, "back-4")
    client.set(NAMES.alive("decider"), "1")
    yield client


def test_a_grouped_queues_returned_stream_is_one_of_its_sources(
    returned: redis.Redis,
    redis_server: RedisServer,  # noqa: F811
) -> None:
    """Not a lane, not a node's own; the node holding entries of it is one to ask."""
    found = run_with_engine(redis_server, lambda engine: find_sources(engine, QUEUE))
    assert [source.stream for source in found.lanes] == [lane(9), lane(4)]
    assert [(source.stream, source.priority) for source in found.returned] == [(RETURNED, None)]
    assert found.own == ()
    assert found.others == frozenset({"decider"})


def answering(monkeypatch: pytest.MonkeyPatch, held: set[str]) -> None:
    """Every node asked answers that it read ahead ``held``."""

    async def ask(self: Any, kind: str, destination: str, nodes: set[str]) -> Any:
        return {node: set(held) for node in nodes}

    monkeypatch.setattr(ControlChannel, "ask", ask)


def test_a_snapshot_shows_what_was_given_back_first_in_its_order(
    returned: redis.Redis,
    redis_server: RedisServer,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """
    The deciding node reads the returned stream before any lane: its unread
    entries, of any priority, come first, in the order given back; what the
    decider handed out is not shown, what it read ahead is.
    """
    answering(monkeypatch, set())

    async def snapshot(engine: Engine) -> Any:
        return await ControlChannel(engine).snapshot(QUEUE)

    bodies = [m.body.decode() for m in run_with_engine(redis_server, snapshot).waiting.messages]
    assert bodies == ["back-0", "back-9", "back-4", "lane-9", "lane-4"]

    async def first_two(engine: Engine) -> Any:
        return await ControlChannel(engine).snapshot(QUEUE, 2)

    bodies = [m.body.decode() for m in run_with_engine(redis_server, first_two).waiting.messages]
    assert bodies[:2] == ["back-0", "back-9"]
    answering(monkeypatch, {"id-held-0"})
    bodies = [m.body.decode() for m in run_with_engine(redis_server, snapshot).waiting.messages]
    assert bodies == ["held-0", "back-0", "back-9", "back-4", "lane-9", "lane-4"]
    # Given back to its tail by a management hold: shown as the decider reads it, after.
    add(returned, RETURNED, "given-9", 9, b"0-1")
    answering(monkeypatch, set())
    bodies = [m.body.decode() for m in run_with_engine(redis_server, snapshot).waiting.messages]
    assert bodies == ["back-0", "back-9", "back-4", "given-9", "lane-9", "lane-4"]


def test_a_purge_ends_the_returned_streams_entries_but_what_a_live_node_holds(
    returned: redis.Redis,
    redis_server: RedisServer,  # noqa: F811
) -> None:
    async def purge(engine: Engine) -> int:
        found = await find_sources(engine, QUEUE)
        return await ClusterQueueActions(engine)._purge_all(found)

    assert run_with_engine(redis_server, purge) == 5
    assert [f[b"m"] for _, f in returned.xrange(RETURNED)] == [payload("held-0", 0)]
    assert returned.xlen(lane(9)) == returned.xlen(lane(4)) == 0
