"""
A grouped shared queue's give-backs, decided again before any newer message
(docs/cluster.md, "A group's order when its owner leaves"): what a leaving
consumer or node gives back, and what a dead node held, goes to the queue's
returned stream, ``PREFIX:{q:/queue/NAME}:returned``, in one script each, so that no
decision comes between a consumer's leaving and its messages' return.
"""

from __future__ import annotations

from typing import Any

from stompbroker.broker.engine.redis.keys import lane_streams
from stompbroker.broker.engine.redis.scripts import load, run_script

__all__ = ["FORGET_RETURNING", "RETURN_GROUPED", "forget_returning", "give_back_grouped"]


#: lua/return_grouped.lua (what it takes and answers is said there).
RETURN_GROUPED = load("return_grouped")

#: lua/forget_node_grouped.lua (what it takes and answers is said there).
FORGET_RETURNING = load("forget_node_grouped")


def give_back_grouped(
    engine: Any, dispatch: Any, messages: list[Any], fields: list[str], leaving: bool
) -> Any:
    """
    :data:`RETURN_GROUPED` through the ordered writer, for
    :meth:`.ClusterDispatch.give_back`.

    :returns: a Deferred firing with the ids of the entries left to the nodes
        that hold them now.
    """
    return engine.writer.command_waited(
        "EVALSHA",
        RETURN_GROUPED,
        6,
        dispatch.registry,
        dispatch.mode,
        dispatch.returned,
        dispatch.own,
        dispatch.lease,
        engine.liveness.key,
        engine.names.group,
        engine.ids.node,
        int(leaving),
        engine.liveness.epoch,
        len(fields),
        *fields,
        *messages,
    )


async def forget_returning(engine: Any, dispatch: Any, node: str) -> int:
    """
    :data:`FORGET_RETURNING` for a dead node, for :meth:`.ClusterDispatch.forget`.

    :returns: how many entries went back, or -1 when the node is alive again.
    """
    lanes = lane_streams(engine.names.prefix, dispatch.destination)
    returned: int = await run_script(
        engine.client,
        FORGET_RETURNING,
        7 + len(lanes),
        dispatch.registry,
        dispatch.mode,
        dispatch.groups,
        dispatch.returned,
        dispatch.node_stream(node),
        engine.names.alive(node),
        dispatch.lease,
        *lanes,
        engine.names.group,
        node,
        dispatch.stream,
    )
    return returned
