"""
The switch of a queue read the plain way to deciding, when its first grouped
message comes (:mod:`stompbroker.broker.engine.redis.group_switch`): the pure
splitting and merging of reads, and the scripts on a real ``redis-server``
with a plain redis-py client.
"""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import redis

from stompbroker.broker.engine.redis.group_switch import (
    CLAIM_SWITCHED,
    ENTER_PLAIN,
    LEAVE_PLAIN,
    GroupSwitch,
    merge,
    split,
)
from stompbroker.broker.engine.redis.grouped_returns import FORGET_RETURNING
from stompbroker.broker.engine.redis.lanes import MARK_GROUPED, READ_LANES, parse_read
from tests.support.queue_scripts import (
    GROUPS,
    LANES,
    MODE,
    QUEUE,
    REGISTRY,
    STREAM,
    RecordingWriter,
)
from tests.support.redis import redis_client, redis_server  # noqa: F401

RETURNED = f"t:{{q:{QUEUE}}}:returned"
LEASE = f"t:{{q:{QUEUE}}}:lease"
OWN = "t:{q:/queue/q}:node:other"


def test_a_switching_read_keeps_only_what_came_before_the_switch_point() -> None:
    """Entries of the queue's stream above the switch point are left; other streams' stay."""
    runs = [(OWN, [(b"9-0", {})]), (STREAM, [(b"4-0", {}), (b"5-0", {}), (b"5-1", {})])]
    kept, left = split(runs, STREAM, (5, 0))
    assert kept == [(OWN, [(b"9-0", {})]), (STREAM, [(b"4-0", {}), (b"5-0", {})])]
    assert left == [b"5-1"]


def test_claimed_entries_join_the_read_in_id_order_once_each() -> None:
    """Claimed entries go among the read ones, by id; one both read and claimed, once."""
    runs = [(OWN, [(b"1-0", {b"m": b"own"})]), (STREAM, [(b"7-0", {b"m": b"b"}), (b"9-0", {})])]
    claimed = {b"3-0": {b"m": b"a"}, b"7-0": {b"m": b"b"}, b"10-0": {b"m": b"c"}}
    assert merge(runs, STREAM, claimed) == [
        (OWN, [(b"1-0", {b"m": b"own"})]),
        (
            STREAM,
            [(b"3-0", {b"m": b"a"}), (b"7-0", {b"m": b"b"}), (b"9-0", {}), (b"10-0", {b"m": b"c"})],
        ),
    ]
    assert merge([(OWN, [])], STREAM, {b"2-0": {}, b"1-5": {}}) == [
        (OWN, []),
        (STREAM, [(b"1-5", {}), (b"2-0", {})]),
    ]


def mark(client: redis.Redis) -> None:
    client.eval(MARK_GROUPED, 2, MODE, STREAM)


def test_the_first_grouped_message_sets_the_switch_point_once(
    redis_client: redis.Redis,  # noqa: F811
) -> None:
    """``gs`` is the newest entry's id when ``g`` is first set, and stays."""
    mark(redis_client)
    assert redis_client.hmget(MODE, "g", "gs") == [b"1", b"0-0"]
    redis_client.delete(MODE)
    redis_client.xadd(STREAM, {"m": b"a"}, id="5-0")
    redis_client.xadd(STREAM, {"m": b"b"}, id="6-0")
    mark(redis_client)
    redis_client.xadd(STREAM, {"m": b"c"}, id="7-0")
    mark(redis_client)
    assert redis_client.hmget(MODE, "g", "gs") == [b"1", b"6-0"]


def test_a_plain_read_of_lanes_reads_nothing_once_the_queue_is_grouped(
    redis_client: redis.Redis,  # noqa: F811
) -> None:
    """Atomic with the read: no plain reader takes an entry sent after ``g``."""
    redis_client.xadd(STREAM, {"m": b"a"})
    plain = (READ_LANES, len(LANES) + 1, *LANES, MODE, "nodes", "n", 10, 1)
    reply = redis_client.eval(*plain)
    assert [fields[b"m"] for _, _, fields in parse_read(reply, LANES)[0]] == [b"a"]
    mark(redis_client)
    redis_client.xadd(STREAM, {"m": b"b"})
    reply = redis_client.eval(*plain)
    assert parse_read(reply, LANES) == ([], [])
    assert redis_client.xpending(STREAM, "nodes")["pending"] == 1
    decided = redis_client.eval(READ_LANES, len(LANES), *LANES, "nodes", "n", 10)
    assert [fields[b"m"] for _, _, fields in parse_read(decided, LANES)[0]] == [b"b"]


def switching(client: redis.Redis, state: str) -> None:
    """
    Plain reader p has a plain-era entry delivered (1-0); g comes; p reads 3-0
    (left), the decider d reads 4-0; p's field says ``state``.
    """
    client.xgroup_create(STREAM, "nodes", id="0", mkstream=True)
    client.xadd(STREAM, {"m": b"plain"}, id="1-0")
    client.xreadgroup("nodes", "p", {STREAM: ">"})
    mark(client)
    client.xadd(STREAM, {"m": b"g1"}, id="3-0")
    client.xreadgroup("nodes", "p", {STREAM: ">"})
    client.xadd(STREAM, {"m": b"g2"}, id="4-0")
    client.xreadgroup("nodes", "d", {STREAM: ">"})
    client.hset(MODE, "r:p", state)
    client.set(LEASE, "d")


def claim(client: redis.Redis, me: str = "d", *left: str) -> Any:
    return client.eval(CLAIM_SWITCHED, 3, MODE, LEASE, STREAM, "nodes", me, *left)


def holders(client: redis.Redis) -> dict[bytes, tuple[str, int]]:
    rows = client.xpending_range(STREAM, "nodes", "-", "+", 10)
    return {row["message_id"]: (row["consumer"].decode(), row["times_delivered"]) for row in rows}


def test_the_decider_takes_what_a_switching_read_left_and_only_that(
    redis_client: redis.Redis,  # noqa: F811
) -> None:
    """
    3-0 becomes the decider's, delivered once as it was; the plain-era 1-0 stays
    with p; p's field ``l`` goes, and no plain reader is left.
    """
    switching(redis_client, "l")
    plain, found = claim(redis_client)
    assert plain == 0
    assert found == [b"3-0", [b"m", b"g1"]]
    assert holders(redis_client) == {b"1-0": ("p", 1), b"3-0": ("d", 1), b"4-0": ("d", 1)}
    assert not redis_client.hexists(MODE, "r:p")


def test_a_node_still_reading_the_plain_way_keeps_its_field(
    redis_client: redis.Redis,  # noqa: F811
) -> None:
    """A field ``r``: its entries above the switch point are taken, and it counts as plain."""
    switching(redis_client, "r")
    plain, found = claim(redis_client)
    assert plain == 1
    assert found[0] == b"3-0"
    assert redis_client.hget(MODE, "r:p") == b"r"


def test_the_deciders_own_switching_read_is_taken_by_its_ids_only(
    redis_client: redis.Redis,  # noqa: F811
) -> None:
    """
    The decider's own left entry comes back by its id; what it read decided
    since (4-0), or what another decider took meanwhile, does not.
    """
    switching(redis_client, "l")
    redis_client.hset(MODE, "r:d", "l")
    redis_client.hdel(MODE, "r:p")
    redis_client.xclaim(STREAM, "nodes", "d", 0, ["3-0"])
    redis_client.xadd(STREAM, {"m": b"g3"}, id="5-0")
    redis_client.xreadgroup("nodes", "e", {STREAM: ">"})
    plain, found = claim(redis_client, "d", "3-0", "5-0")
    assert (plain, found) == (0, [b"3-0", [b"m", b"g1"]])
    assert not redis_client.hexists(MODE, "r:d")


def test_only_the_lease_holder_claims(redis_client: redis.Redis) -> None:  # noqa: F811
    """Another node's claim takes nothing."""
    switching(redis_client, "l")
    assert claim(redis_client, "e") == [-1, []]
    assert holders(redis_client)[b"3-0"] == ("p", 1)


def test_a_node_that_reads_plain_no_more_leaves_a_field_for_the_decider(
    redis_client: redis.Redis,  # noqa: F811
) -> None:
    """
    Its field goes with its token (a later reading's stays); ``l`` stays until
    the decider took what it left, and a new reading does not overwrite it.
    """
    assert redis_client.eval(ENTER_PLAIN, 1, MODE, "r:p", "r1") == [None, None, None]
    redis_client.eval(ENTER_PLAIN, 1, MODE, "r:p", "r2")
    redis_client.eval(LEAVE_PLAIN, 1, MODE, "r:p", "r1")
    assert redis_client.hget(MODE, "r:p") == b"r2"
    redis_client.eval(LEAVE_PLAIN, 1, MODE, "r:p", "r2")
    assert not redis_client.hexists(MODE, "r:p")
    redis_client.eval(LEAVE_PLAIN, 1, MODE, "r:p", "l")
    redis_client.eval(ENTER_PLAIN, 1, MODE, "r:p", "r3")
    redis_client.eval(LEAVE_PLAIN, 1, MODE, "r:p", "r3")
    redis_client.eval(LEAVE_PLAIN, 1, MODE, "r:p", "*")
    assert redis_client.hget(MODE, "r:p") == b"l"
    redis_client.hset(MODE, "r:q", "r7")
    redis_client.eval(LEAVE_PLAIN, 1, MODE, "r:q", "*")
    assert not redis_client.hexists(MODE, "r:q")


def test_what_a_dead_switching_node_left_comes_back_as_never_delivered(
    redis_client: redis.Redis,  # noqa: F811
) -> None:
    """
    Its plain-era entry (delivered) comes back with its delivery count, the one
    it left above the switch point without; its field goes.
    """
    switching(redis_client, "l")
    redis_client.delete(LEASE)
    moved = redis_client.eval(
        FORGET_RETURNING,
        7 + len(LANES),
        REGISTRY,
        MODE,
        GROUPS,
        RETURNED,
        "t:{q:/queue/q}:node:p",
        "t:alive:p",
        LEASE,
        *LANES,
        "nodes",
        "p",
        STREAM,
    )
    assert moved == 2
    returned = [fields for _, fields in redis_client.xrange(RETURNED)]
    assert returned == [{b"m": b"plain", b"r": b"1"}, {b"m": b"g1"}]
    assert not redis_client.hexists(MODE, "r:p")


class FakeRedis:
    """What :class:`GroupSwitch` asks of the engine's unretried client, answered from a dict."""

    def __init__(self, modes: list[Any], since: bytes | None = None) -> None:
        self.modes = modes
        self.since = since
        self.calls: list[tuple[Any, ...]] = []

    async def evalsha(self, sha: str, *args: Any) -> Any:
        self.calls.append((sha, *args))
        return self.modes

    async def hget(self, key: str, field: str) -> Any:
        return self.since


class FakeDispatch:
    """The queue's dispatch as :class:`GroupSwitch` sees it: taking in modes may make it decided."""

    def __init__(self) -> None:
        self.mode, self.stream, self.lease = MODE, STREAM, LEASE
        self.active = self.grouped = self.leading = False

    async def take_modes(self, modes: list[Any]) -> None:
        if modes[2]:
            self.active = self.grouped = True


def switch_of(modes: list[Any], since: bytes | None = None) -> tuple[GroupSwitch, Any, Any]:
    engine = SimpleNamespace(
        unretried=FakeRedis(modes, since), writer=RecordingWriter(), ids=SimpleNamespace(node="n")
    )
    dispatch = FakeDispatch()
    return GroupSwitch(engine, dispatch), dispatch, engine


def test_a_plain_reading_says_so_once_and_leaves_after_the_read_under_way() -> None:
    """The field is set before the first plain read only; the last consumer's leaving waits."""
    switch, dispatch, engine = switch_of([None, None, None])
    assert asyncio.run(switch.before_read(dispatch.take_modes))
    assert asyncio.run(switch.before_read(dispatch.take_modes))
    [(script, _, _, field, token)] = engine.unretried.calls
    assert (script, field) == (ENTER_PLAIN.sha, "r:n")
    switch.leave_soon()
    assert engine.writer.commands == []
    assert asyncio.run(switch.after_read([(STREAM, [(b"1-0", {})])], True)) == [
        (STREAM, [(b"1-0", {})])
    ]
    assert engine.writer.commands == [("EVALSHA", LEAVE_PLAIN, 1, MODE, "r:n", token)]
    assert not switch.entered


def test_a_reading_that_finds_the_queue_grouped_first_reads_decided() -> None:
    """``g`` in the modes read with the field: no plain read, and the field goes."""
    switch, dispatch, engine = switch_of([None, b"3", b"1"])
    assert not asyncio.run(switch.before_read(dispatch.take_modes))
    [(_, _, _, _, token)] = engine.unretried.calls
    assert engine.writer.commands == [("EVALSHA", LEAVE_PLAIN, 1, MODE, "r:n", token)]


def test_the_switching_read_leaves_what_came_after_the_switch_point() -> None:
    """Its entries above ``gs`` are left (and remembered); the field says ``l``."""
    switch, dispatch, engine = switch_of([None, None, None], since=b"5-0")
    assert asyncio.run(switch.before_read(dispatch.take_modes))
    dispatch.active = dispatch.grouped = True
    runs = [(STREAM, [(b"4-0", {}), (b"6-0", {})])]
    assert asyncio.run(switch.after_read(runs, True)) == [(STREAM, [(b"4-0", {})])]
    assert switch.left == {b"6-0"}
    assert engine.writer.commands == [("EVALSHA", LEAVE_PLAIN, 1, MODE, "r:n", "l")]
