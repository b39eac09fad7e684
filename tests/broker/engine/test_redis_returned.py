"""
A grouped shared queue's returned stream and one node's round-robin across nodes
(:mod:`stompbroker.broker.engine.redis.dispatch_scripts`), run on a real
``redis-server`` with a plain redis-py client (docs/design/cluster.md, "Selectors,
consumer priorities, exclusive consumers and message groups").
"""

from __future__ import annotations

from typing import Any

import redis

from stompbroker.broker.engine.redis.codec import encode
from stompbroker.broker.engine.redis.grouped_returns import FORGET_RETURNING, RETURN_GROUPED
from stompbroker.protocol.message import Message
from tests.support.queue_scripts import (
    ALIVE,
    GROUPS,
    LANES,
    MODE,
    QUEUE,
    REGISTRY,
    STREAM,
    move,
    register,
)
from tests.support.redis import redis_client, redis_server  # noqa: F401

RETURNED = f"t:{{q:{QUEUE}}}:returned"
LEASE = f"t:{{q:{QUEUE}}}:lease"


def own(node: str) -> str:
    return f"t:{{q:{QUEUE}}}:node:{node}"


def payloads(client: redis.Redis, stream: str) -> list[bytes]:
    return [fields[b"m"] for _, fields in client.xrange(stream)]


def test_ungrouped_messages_go_round_robin_over_every_nodes_consumers(
    redis_client: redis.Redis,  # noqa: F811
) -> None:
    """As one node spreads them: each consumer in turn, whatever node it is on."""
    orders = {field: register(redis_client, field) for field in ("a/1", "a/2", "b/3")}
    consumers = [(field, field[0], 0, orders[field]) for field in orders]
    assert move(redis_client, "a", [""] * 6, consumers) == [
        ("a", ""),
        ("a", ""),
        ("b", ""),
        ("a", ""),
        ("a", ""),
        ("b", ""),
    ]
    assert payloads(redis_client, own("b")) == [b"-", b"-"]


def test_a_consumer_whose_node_is_full_is_passed_over(
    redis_client: redis.Redis,  # noqa: F811
) -> None:
    """The next in turn with room gets the message, as one node's round-robin skips a full one."""
    orders = {field: register(redis_client, field) for field in ("a/1", "b/2")}
    consumers = [(field, field[0], 0, orders[field]) for field in orders]
    redis_client.xgroup_create(own("b"), "nodes", id="0", mkstream=True)
    for _ in range(10):
        redis_client.xadd(own("b"), {"m": b"old"})
    assert move(redis_client, "a", ["", ""], consumers) == [("a", ""), ("a", "")]


def test_a_grouped_message_waits_behind_what_was_given_back(
    redis_client: redis.Redis,  # noqa: F811
) -> None:
    """
    While the returned stream holds unread entries, a grouped entry of the
    queue's stream joins its tail; an ungrouped one is decided at once.
    """
    orders = {field: register(redis_client, field) for field in ("a/1", "b/2")}
    consumers = [(field, field[0], 0, orders[field]) for field in orders]
    redis_client.xgroup_create(RETURNED, "nodes", id="0", mkstream=True)
    redis_client.xadd(RETURNED, {"m": b"g1"})
    assert move(redis_client, "a", ["g", ""], consumers) == [(RETURNED, ""), ("a", "")]
    assert payloads(redis_client, RETURNED) == [b"g1", b"g"]
    assert redis_client.xlen(STREAM) == 1  # the ungrouped one, kept here
    # Read from the returned stream, they are decided at once, in order: the
    # group's new owner is the next in turn after the ungrouped one's (a/1).
    assert move(redis_client, "a", ["g", "g"], consumers, RETURNED, add=False) == [
        ("b", "b/2"),
        ("b", "b/2"),
    ]


def give_back(
    client: redis.Redis, me: str, leavers: list[str], messages: list[Any], leaving: bool = False
) -> list[Any]:
    """Run :data:`RETURN_GROUPED` as node ``me`` at epoch 1; :returns: the entries left over."""
    client.set(ALIVE + me, 1)
    foreign: list[Any] = client.eval(
        RETURN_GROUPED,
        6,
        REGISTRY,
        MODE,
        RETURNED,
        own(me),
        LEASE,
        ALIVE + me,
        "nodes",
        me,
        int(leaving),
        1,
        len(leavers),
        *leavers,
        *messages,
    )
    return foreign


def test_a_leaving_owners_messages_and_its_unread_ones_go_back_in_order(
    redis_client: redis.Redis,  # noqa: F811
) -> None:
    """
    What it held first, then what its node's own stream holds unread for it (not
    for the node's other consumers), and it leaves the registry in the same step.
    """
    register(redis_client, "b/1")
    register(redis_client, "b/2")
    stream = own("b")
    redis_client.xgroup_create(stream, "nodes", id="0", mkstream=True)
    read = redis_client.xadd(stream, {"m": b"g1", "o": b"b/1"})
    redis_client.xreadgroup("nodes", "b", {stream: ">"}, count=1)
    redis_client.xadd(stream, {"m": b"g2", "o": b"b/1"})
    redis_client.xadd(stream, {"m": b"h1", "o": b"b/2"})
    redis_client.xadd(stream, {"m": b"g3", "o": b"b/1"})
    version = int(redis_client.hget(MODE, "v") or 0)
    messages = [stream, read, b"g1+", 0, "", "", b"x", 0]
    assert give_back(redis_client, "b", ["b/1"], messages) == []
    assert payloads(redis_client, RETURNED) == [b"g1+", b"x", b"g2", b"g3"]
    assert payloads(redis_client, stream) == [b"h1"]
    assert redis_client.xpending(stream, "nodes")["pending"] == 0
    assert redis_client.hkeys(REGISTRY) == [b"b/2"]
    assert int(redis_client.hget(MODE, "v") or 0) == version + 1


def test_the_last_consumer_leaving_hands_back_the_whole_own_stream_and_the_lease(
    redis_client: redis.Redis,  # noqa: F811
) -> None:
    """A node that leaves the queue: its own stream goes back whole, with delivery counts."""
    register(redis_client, "b/1")
    stream = own("b")
    redis_client.xgroup_create(stream, "nodes", id="0", mkstream=True)
    redis_client.xadd(stream, {"m": b"g1", "o": b"b/1"})
    redis_client.xreadgroup("nodes", "b", {stream: ">"}, count=1)
    redis_client.xadd(stream, {"m": b"g2", "o": b"b/1"})
    redis_client.set(LEASE, "b")
    assert give_back(redis_client, "b", ["b/1"], [], leaving=True) == []
    entries = redis_client.xrange(RETURNED)
    assert [fields for _, fields in entries] == [{b"m": b"g1", b"r": b"1"}, {b"m": b"g2"}]
    assert not redis_client.exists(stream, LEASE)
    assert redis_client.hlen(REGISTRY) == 0


def forget(client: redis.Redis, node: str) -> int:
    moved: int = client.eval(
        FORGET_RETURNING,
        7 + len(LANES),
        REGISTRY,
        MODE,
        GROUPS,
        RETURNED,
        own(node),
        ALIVE + node,
        LEASE,
        *LANES,
        "nodes",
        node,
        STREAM,
    )
    return moved


def dead_node_holding(client: redis.Redis, deciding: bool) -> None:
    """Node d: g1 kept from the queue's stream (pending), g2 in its own stream; then it dies."""
    register(client, "d/1")
    client.hset(GROUPS, "g", "d/1")
    client.xgroup_create(STREAM, "nodes", id="0", mkstream=True)
    client.xadd(STREAM, {"m": b"g1"})
    client.xreadgroup("nodes", "d", {STREAM: ">"})
    client.xgroup_create(own("d"), "nodes", id="0", mkstream=True)
    client.xadd(own("d"), {"m": b"g2", "o": b"d/1"})
    if deciding:
        client.set(LEASE, "d")
    client.delete(ALIVE + "d")


def test_a_dead_nodes_entries_go_back_with_its_consumers_and_groups_forgotten(
    redis_client: redis.Redis,  # noqa: F811
) -> None:
    """What it kept pending first, then its own stream (another node was deciding)."""
    dead_node_holding(redis_client, deciding=False)
    assert forget(redis_client, "d") == 2
    entries = redis_client.xrange(RETURNED)
    assert [fields for _, fields in entries] == [{b"m": b"g1", b"r": b"1"}, {b"m": b"g2"}]
    assert redis_client.xlen(STREAM) == 0
    assert redis_client.hlen(REGISTRY) == 0 and redis_client.hlen(GROUPS) == 0


def test_a_dead_deciders_own_stream_goes_back_first(
    redis_client: redis.Redis,  # noqa: F811
) -> None:
    """A decider never moves entries to itself: its own stream holds the older ones."""
    dead_node_holding(redis_client, deciding=True)
    assert forget(redis_client, "d") == 2
    assert payloads(redis_client, RETURNED) == [b"g2", b"g1"]
    assert not redis_client.exists(LEASE)


def test_a_node_alive_again_keeps_what_it_holds(
    redis_client: redis.Redis,  # noqa: F811
) -> None:
    """Only while its liveness key is gone: a node back from a lapse keeps its own."""
    dead_node_holding(redis_client, deciding=False)
    redis_client.set(ALIVE + "d", 1)
    assert forget(redis_client, "d") == -1
    assert redis_client.hkeys(REGISTRY) == [b"d/1"]
    assert redis_client.xlen(own("d")) == 1


def test_an_entry_another_node_took_over_is_left_to_it(
    redis_client: redis.Redis,  # noqa: F811
) -> None:
    """After a lapse (its epoch moved on), a node gives back only what is still its own."""
    register(redis_client, "b/1")
    redis_client.xgroup_create(STREAM, "nodes", id="0", mkstream=True)
    taken = redis_client.xadd(STREAM, {"m": b"g1"})
    redis_client.xreadgroup("nodes", "b", {STREAM: ">"})
    redis_client.xclaim(STREAM, "nodes", "c", 0, [taken])
    client = redis_client
    client.set(ALIVE + "b", 2)
    foreign = client.eval(
        RETURN_GROUPED, 6, REGISTRY, MODE, RETURNED, own("b"), LEASE, ALIVE + "b",
        "nodes", "b", 0, 1, 1, "b/1", STREAM, taken, b"g1", 0,
    )  # fmt: skip
    assert foreign == [taken]
    assert not redis_client.exists(RETURNED)
    assert redis_client.xlen(STREAM) == 1
    assert redis_client.hlen(REGISTRY) == 0


def test_a_redelivery_record_counts_in_what_a_dead_node_held(
    redis_client: redis.Redis,  # noqa: F811
) -> None:
    """A count the dead node kept (its consumers NACKed) goes back with the entry."""
    dead_node_holding(redis_client, deciding=False)
    payload = encode("d", Message(QUEUE, "m-1", (), b"g1"))
    redis_client.delete(STREAM)
    redis_client.xgroup_create(STREAM, "nodes", id="0", mkstream=True)
    entry = redis_client.xadd(STREAM, {"m": payload})
    redis_client.xreadgroup("nodes", "d", {STREAM: ">"})
    redis_client.hset(f"{STREAM}:redeliveries:d", entry, 4)
    assert forget(redis_client, "d") == 2
    [(_, fields), _] = redis_client.xrange(RETURNED)
    assert fields == {b"m": payload, b"r": b"5"}
    assert not redis_client.exists(f"{STREAM}:redeliveries:d")
