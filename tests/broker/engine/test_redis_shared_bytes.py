"""
A policy's ``max-length-bytes`` on the redis engine's shared queue streams
(:mod:`stompbroker.broker.engine.redis.shared_bytes`): the adding and ending
scripts, run on a real ``redis-server`` with a plain redis-py client.
"""

from __future__ import annotations

import pytest
import redis

from stompbroker.broker.engine.redis.codec import decode, encode, encode_entry
from stompbroker.broker.engine.redis.dispatch_scripts import MOVE, RETURN_NODE
from stompbroker.broker.engine.redis.keys import byte_counter, record_key, recount_mark
from stompbroker.broker.engine.redis.scripts import splice
from stompbroker.broker.engine.redis.settle_scripts import SETTLE
from stompbroker.broker.engine.redis.shared_bytes import ADD_SIZED
from stompbroker.protocol.message import Message
from tests.support.redis import redis_client, redis_server  # noqa: F401

STREAM = "p:{q:/queue/b}"
COUNTER = byte_counter(STREAM)
DLQ = "p:{q:/queue/DLQ.b}"


@pytest.fixture
def client(redis_client: redis.Redis) -> redis.Redis:  # noqa: F811
    return redis_client


def payload(body: bytes, index: int = 0) -> bytes:
    return encode("n1", Message("/queue/b", f"m-{index}", (), body))


def add(
    client: redis.Redis,
    body: bytes,
    *,
    max_bytes: int = 10,
    max_length: int = -1,
    overflow: str = "drop-head",
    index: int = 0,
) -> list[object]:
    """Run :data:`ADD_SIZED` as the engine does; the dead-letter stream is :data:`DLQ`."""
    dead = DLQ if overflow == "dead-letter" else STREAM
    reply = client.eval(
        ADD_SIZED,
        5,
        STREAM,
        COUNTER,
        recount_mark(STREAM),
        dead,
        byte_counter(dead),
        max_bytes,
        max_length,
        overflow,
        payload(body, index),
        len(body),
        "/queue/DLQ.b",
        "dl-1",
        "maxlen",
    )
    assert isinstance(reply, list)
    return reply


def bodies(client: redis.Redis, stream: str = STREAM) -> list[bytes]:
    return [decode(fields[b"m"])[1].body for _, fields in client.xrange(stream)]


def count(client: redis.Redis) -> int:
    return int(client.get(COUNTER) or 0)


def test_drop_head_drops_the_oldest_over_the_bytes(client: redis.Redis) -> None:
    """Three 4-byte bodies under a 10-byte limit: the oldest goes; the count is 8."""
    for index in range(3):
        assert add(client, b"abc%d" % index, index=index) == [1, 0]
    assert bodies(client) == [b"abc1", b"abc2"]
    assert count(client) == 8


def test_reject_publish_refuses_what_would_go_over_and_names_the_limit(
    client: redis.Redis,
) -> None:
    """Two 4-byte bodies fit 10 bytes, a third is refused: nothing added, the count stays."""
    for index in range(2):
        assert add(client, b"abcd", overflow="reject-publish", index=index) == [1, 0]
    assert add(client, b"abcd", overflow="reject-publish") == [0, b"max-length-bytes"]
    assert bodies(client) == [b"abcd", b"abcd"]
    assert count(client) == 8


def test_max_length_beside_the_bytes_is_named_when_it_is_the_one_reached(
    client: redis.Redis,
) -> None:
    """A policy with both limits: one-byte bodies stop at max-length 2."""
    for index in range(2):
        add(client, b"a", max_length=2, overflow="reject-publish", index=index)
    assert add(client, b"a", max_length=2, overflow="reject-publish") == [0, b"max-length"]


def test_dead_letter_moves_the_oldest_to_the_dead_letter_stream(client: redis.Redis) -> None:
    """The pushed-out entry goes to the DLQ's stream behind its marking, and its counter."""
    client.set(byte_counter(DLQ), 0)
    for index in range(2):
        add(client, b"abcdef", overflow="dead-letter", index=index)
    assert bodies(client) == [b"abcdef"]
    assert count(client) == 6
    [(_, fields)] = client.xrange(DLQ)
    _, dead = decode(fields[b"m"])
    assert dead.body == b"abcdef"
    assert dict(dead.headers)["dead-letter-reason"] == "maxlen"
    assert int(client.get(byte_counter(DLQ)) or 0) == 6


def end(client: redis.Redis, stream: str, *ids: bytes) -> list[bytes]:
    """Read ``stream`` as node B and settle ``ids`` as the engine does (SETTLE)."""
    client.xgroup_create(stream, "nodes", id="0", mkstream=True)
    client.xreadgroup("nodes", "B", {stream: ">"})
    client.set("p:alive:B", "1")
    keys = [stream, record_key("B", stream), "p:alive:B", byte_counter(stream)]
    return list(client.eval(SETTLE, 4, *keys, "nodes", "B", 0, "1", *ids))


def test_ending_entries_takes_their_bytes_off_once(client: redis.Redis) -> None:
    """Settling deletes and uncounts; an entry already gone is not taken off again."""
    add(client, b"abcd", index=0)
    add(client, b"ef", index=1)
    first, second = (entry_id for entry_id, _ in client.xrange(STREAM))
    assert end(client, STREAM, first) == []
    assert count(client) == 2
    client.eval(
        SETTLE,
        4,
        STREAM,
        record_key("B", STREAM),
        "p:alive:B",
        COUNTER,
        "nodes",
        "B",
        0,
        "1",
        first,
        second,
    )
    assert count(client) == 0
    assert bodies(client) == []


def test_ending_entries_of_a_stream_without_a_counter_makes_none(client: redis.Redis) -> None:
    """A stream no byte limit applied to gets no counter from being ended."""
    entry = client.xadd(STREAM, {"m": payload(b"abc")})
    assert end(client, STREAM, entry) == []
    assert not client.exists(COUNTER)


def test_a_count_that_drifted_up_is_recounted_before_it_refuses(client: redis.Redis) -> None:
    """A counter that says full while the stream holds 4 bytes is recounted: the SEND fits."""
    add(client, b"abcd", overflow="reject-publish")
    client.set(COUNTER, 1000)
    assert add(client, b"abcd", overflow="reject-publish", index=1) == [1, 0]
    assert count(client) == 8


def test_a_count_that_drifted_is_recounted_at_most_once_a_second(client: redis.Redis) -> None:
    """Within the second after a recount the count is taken as it is."""
    add(client, b"abcd", overflow="reject-publish")
    client.set(recount_mark(STREAM), 1, px=1000)
    client.set(COUNTER, 1000)
    assert add(client, b"abcd", overflow="reject-publish", index=1) == [0, b"max-length-bytes"]


def test_an_empty_stream_counts_zero_whatever_the_counter_says(client: redis.Redis) -> None:
    """A count left over (the stream emptied by a node that did not count) is reset."""
    client.set(COUNTER, 1000)
    client.set(recount_mark(STREAM), 1, px=1000)
    assert add(client, b"abcd", overflow="reject-publish") == [1, 0]
    assert count(client) == 4


def test_a_dead_letter_marked_entry_counts_its_body_only(client: redis.Redis) -> None:
    """An entry moved to a dead-letter stream counts the body behind its marking."""
    client.set(byte_counter(DLQ), 0)
    add(client, b"abcdefgh", overflow="dead-letter", index=0)
    add(client, b"abcdefgh", overflow="dead-letter", index=1)
    [(entry, _)] = client.xrange(DLQ)
    assert end(client, DLQ, entry) == []
    assert int(client.get(byte_counter(DLQ)) or 0) == 0


def test_an_entry_a_deciding_node_moves_to_a_node_is_counted_out_and_back_in(
    client: redis.Redis,
) -> None:
    """
    The decider's MOVE takes the entry's bytes off the queue stream's count; a
    node handing its own stream back (RETURN_NODE) counts them in again.
    """
    add(client, b"abcd", max_bytes=100)
    [(entry, fields)] = client.xrange(STREAM)
    client.xgroup_create(STREAM, "nodes", id="0")
    client.xreadgroup("nodes", "n1", {STREAM: ">"})
    client.hset("p:{q:/queue/b}:consumers", "n2/1", "[]")
    args = [
        "nodes",
        "p:{q:/queue/b}:node:",
        "p:{q:/queue/b}:returned",
        "n1",
        1,
        STREAM,
        entry,
        fields[b"m"],
        "",
        0,
        "",
        "",
    ]
    keys = ["p:{q:/queue/b}:consumers", "p:{q:/queue/b}:groups", "p:{q:/queue/b}:mode"]
    answers = client.eval(MOVE, 3, *keys, *args, 1, 1, "n2", 10, "n2/1", "n2", 0, 1)
    assert answers == [b"n2", b""]
    assert count(client) == 0
    own = "p:{q:/queue/b}:node:n2"
    assert client.eval(RETURN_NODE, 3, own, STREAM, COUNTER, "nodes") == 1
    assert count(client) == 4
    assert bodies(client) == [b"abcd"]


@pytest.mark.parametrize("body", [b"", b"x", b"\n\n" * 40, bytes(range(256)) * 300])
def test_a_bodys_size_is_read_from_every_form_of_entry(client: redis.Redis, body: bytes) -> None:
    """A queue entry's binary form, the JSON form, and either moved to a dead-letter stream."""
    message = Message("/queue/b", "m-1", (("k", "v:w"),), body)
    forms = [encode("n1", message), encode_entry("n1", message)]
    forms += [b'D["/queue/dlq","m-9","x"]\n' + form for form in forms]
    script = splice('--- @include "body_size"\nreturn body_size(ARGV[1])')
    assert [client.eval(script, 0, form) for form in forms] == [len(body)] * 4
