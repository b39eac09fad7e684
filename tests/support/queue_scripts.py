"""
One shared queue's keys in Redis (prefix ``t``) and the arguments its scripts
take, built as a node builds them: registering a consumer
(:data:`~stompbroker.broker.engine.redis.consumer_registry.REGISTER`) and
deciding entries read from a stream
(:data:`~stompbroker.broker.engine.redis.dispatch_scripts.MOVE`), for the tests
that run those scripts on a real ``redis-server`` with a plain redis-py client.
"""

from __future__ import annotations

from typing import Any

import redis

from stompbroker.broker.engine.redis.consumer_registry import REGISTER
from stompbroker.broker.engine.redis.dispatch_scripts import MOVE
from stompbroker.broker.engine.redis.keys import lane_streams

QUEUE = "/queue/q"
REGISTRY, MODE, GROUPS = (
    f"t:{{q:{QUEUE}}}:consumers",
    f"t:{{q:{QUEUE}}}:mode",
    f"t:{{q:{QUEUE}}}:groups",
)
STREAM = f"t:{{q:{QUEUE}}}"
LANES = lane_streams("t", QUEUE)
ALIVE = "t:alive:"


class RecordingWriter:
    """Records the commands the node's ordered writer would send, for fakes of an engine."""

    connected = True

    def __init__(self) -> None:
        self.commands: list[tuple[Any, ...]] = []

    def command(self, *args: Any) -> None:
        self.commands.append(args)


def register(client: redis.Redis, field: str, single: str = "", priority: int = 0) -> int:
    """
    Register consumer ``field`` (``NODE/N``) as its node's SUBSCRIBE does, with
    that node live.

    :param single: its ``x-single-active-consumer`` (``"1"``, ``"0"``, ``""`` unsaid).
    :returns: its order.
    """
    node = field.partition("/")[0]
    client.set(ALIVE + node, 1)
    order: int = client.eval(
        REGISTER,
        2 + len(LANES),
        REGISTRY,
        MODE,
        *LANES,
        field,
        node,
        "",
        priority,
        0,
        single,
        10,
        ALIVE,
    )
    return order


def move(
    client: redis.Redis,
    me: str,
    groups: list[str],
    consumers: list[Any],
    stream: str = STREAM,
    add: bool = True,
) -> list[tuple[str, str]]:
    """
    Read one entry per group (``""``: none) from ``stream`` and decide them with
    :data:`MOVE` as node ``me``, every node having room for 10.

    :param consumers: ``(field, node, priority, order)`` of each consumer MOVE may pick.
    :param add: first add the entries (each group's name the payload, ``-`` for
        none), making the stream and its group ``nodes``.
    :returns: ``(where, consumer)`` per entry, as MOVE answers.
    """
    if add:
        client.xgroup_create(stream, "nodes", id="0", mkstream=True)
        for group in groups:
            client.xadd(stream, {"m": group.encode() or b"-"})
    read: Any = client.xreadgroup("nodes", me, {stream: ">"})
    [(_, entries)] = read
    nodes = sorted({node for _, node, _, _ in consumers})
    args: list[Any] = ["nodes", f"t:{{q:{QUEUE}}}:node:", f"t:{{q:{QUEUE}}}:returned", me, 10]
    for (entry_id, fields), group in zip(entries, groups, strict=True):
        args += [stream, entry_id, fields[b"m"], group, 0, "", ""]
        args += [len(nodes), len(consumers)]
        for node in nodes:
            args += [node, 10]
        for consumer in consumers:
            args += list(consumer)
    answers: list[Any] = client.eval(MOVE, 3, REGISTRY, GROUPS, MODE, *args)
    return [(answers[i].decode(), answers[i + 1].decode()) for i in range(0, len(answers), 2)]
