"""
The scripts that decide a shared queue's consumers
(:mod:`stompbroker.broker.engine.redis.consumer_registry`,
:mod:`stompbroker.broker.engine.redis.cluster_dispatch`), run on a real
``redis-server`` with a plain redis-py client: the one shared
``x-single-active-consumer`` declaration, and a group's new owner picked by
one node's round-robin (docs/design/cluster.md, "Selectors, consumer priorities,
exclusive consumers and message groups").
"""

from __future__ import annotations

import redis

from stompbroker.broker.engine.redis.codec import encode, encode_entry
from stompbroker.broker.engine.redis.consumer_registry import UNREGISTER
from stompbroker.broker.engine.redis.queue_sources import entry_order
from stompbroker.broker.engine.redis.scripts import splice
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


def unregister(client: redis.Redis, field: str) -> None:
    client.eval(UNREGISTER, 2, REGISTRY, MODE, field)


def declared(client: redis.Redis) -> bytes | None:
    value: bytes | None = client.hget(MODE, "sa")
    return value


def test_the_first_consumer_declares_and_a_later_conflicting_one_changes_nothing(
    redis_client: redis.Redis,  # noqa: F811
) -> None:
    """x-single-active-consumer:true on the first SUBSCRIBE anywhere; false after it is ignored."""
    register(redis_client, "a/1", "1")
    register(redis_client, "b/2", "0")
    assert declared(redis_client) == b"1"


def test_the_declaration_stands_while_the_queue_holds_messages(
    redis_client: redis.Redis,  # noqa: F811
) -> None:
    """With every consumer gone and messages waiting, the next first SUBSCRIBE finds it declared."""
    register(redis_client, "a/1", "1")
    unregister(redis_client, "a/1")
    redis_client.xadd(STREAM, {"m": b"x"})
    register(redis_client, "b/2")
    assert declared(redis_client) == b"1"
    unregister(redis_client, "b/2")
    redis_client.delete(STREAM)
    register(redis_client, "b/3")
    assert declared(redis_client) == b"0"


def test_a_waiting_message_in_a_priority_lane_keeps_the_queue_alive(
    redis_client: redis.Redis,  # noqa: F811
) -> None:
    """The queue holds messages in any lane: its declaration stands."""
    register(redis_client, "a/1", "1")
    unregister(redis_client, "a/1")
    redis_client.xadd(LANES[0], {"m": b"x"})
    register(redis_client, "b/2", "0")
    assert declared(redis_client) == b"1"


def test_a_dead_nodes_consumer_does_not_keep_the_first_subscribe_from_declaring(
    redis_client: redis.Redis,  # noqa: F811
) -> None:
    """Entries of a node whose liveness key is gone count as no consumer."""
    register(redis_client, "dead/1", "0")
    redis_client.delete(ALIVE + "dead")
    register(redis_client, "b/2", "1")
    assert declared(redis_client) == b"1"


def test_groups_of_a_departed_owner_go_round_robin_among_the_nodes_consumers(
    redis_client: redis.Redis,  # noqa: F811
) -> None:
    """After the owner's turn, the next consumers in order take the new groups in turn, any node."""
    orders = {field: register(redis_client, field) for field in ("a/1", "a/2", "b/3")}
    redis_client.hset(MODE, "t:0", orders["a/1"])
    for group in ("g1", "g2", "g3"):
        redis_client.hset(GROUPS, group, "a/1")
    unregister(redis_client, "a/1")
    consumers = [(field, field[0], 0, orders[field]) for field in ("a/1", "a/2", "b/3")]
    assert move(redis_client, "a", ["g1", "g2", "g3"], consumers) == [
        ("a", "a/2"),
        ("b", "b/3"),
        ("a", "a/2"),
    ]
    assert redis_client.hgetall(GROUPS) == {b"g1": b"a/2", b"g2": b"b/3", b"g3": b"a/2"}
    [(_, fields)] = redis_client.xrange(f"t:{{q:{QUEUE}}}:node:b")
    # The entry keeps the id it had in the queue's stream (field i), for the queue's order:
    # the second of the three added there.
    newest, original = redis_client.xinfo_stream(STREAM)["last-generated-id"], fields.pop(b"i")
    assert fields == {b"m": b"g2", b"o": b"b/3"}
    assert entry_order(original) < entry_order(newest)


def test_a_group_stays_with_its_owner_while_it_is_registered(
    redis_client: redis.Redis,  # noqa: F811
) -> None:
    """A registered owner keeps its group, whoever would be next in turn."""
    orders = {field: register(redis_client, field) for field in ("a/1", "b/2")}
    redis_client.hset(GROUPS, "g", "b/2")
    consumers = [(field, field[0], 0, orders[field]) for field in ("a/1", "b/2")]
    assert move(redis_client, "a", ["g", "g"], consumers) == [("b", "b/2"), ("b", "b/2")]


def test_the_scripts_read_a_payloads_redelivery_count_in_either_form(
    redis_client: redis.Redis,  # noqa: F811
) -> None:
    """The binary entry form and the JSON one both tell the count; anything else none."""
    message = Message("/queue/a", "n1-1", (("k", "v"),), b"body")
    message.redeliveries = 70000
    script = splice('--- @include "redeliveries_of"\nreturn redeliveries_of(ARGV[1])')
    assert redis_client.eval(script, 0, encode_entry("n1", message)) == 70000
    assert redis_client.eval(script, 0, encode("n1", message)) == 70000
    assert redis_client.eval(script, 0, b"M\x00") is None
    assert redis_client.eval(script, 0, b"garbage") is None
