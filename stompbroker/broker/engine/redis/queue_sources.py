"""
Where a shared ``/queue/``'s messages may wait in Redis, and which nodes hold
some: what the management's browse, purge, move, copy and retry
(:mod:`.control`, :mod:`.queue_actions`) act on.

A queue's messages wait in up to ten lanes, one per priority (its stream is
the lane of priority 4, the others ``PREFIX:{q:/queue/X}:lane:P``: :mod:`.lanes`),
and, once its consumers or messages ask for a deciding node (:mod:`.dispatch`),
in the nodes' own streams ``PREFIX:{q:/queue/X}:node:NODE``, which hold entries of
every priority; and, once it had a grouped message, in its returned stream
``PREFIX:{q:/queue/X}:returned`` (:mod:`.grouped_returns`), which holds what consumers
that left or dead nodes gave back, of every priority, read by the deciding
node before anything else (:data:`RETURNED_FIRST`).  A node has an own stream
of a queue while it has consumers of it, so the nodes whose own streams are
looked at are those of the queue's consumer registry (``PREFIX:{q:/queue/X}:consumers``)
and this one.

:func:`find_sources` costs two pipelined round trips (``EXISTS`` of the ten
lanes and the returned stream, ``HKEYS`` of the registry; ``XPENDING`` of each stream found and
``EXISTS`` of each own stream) and one more of ``EXISTS`` of each node's
liveness key.
"""

from __future__ import annotations

from typing import Any

from attrs import frozen

from stompbroker.broker.engine.redis.keys import (
    lane_stream,
    node_stream,
    registry_key,
    returned_stream,
)
from stompbroker.broker.engine.redis.lanes import LANE_ORDER

__all__ = [
    "RETURNED_FIRST",
    "QueueSources",
    "Source",
    "entry_order",
    "find_sources",
    "original_order",
]

#: Where a returned stream's entries stand, as the negated priority of a sort
#: key ``(-priority, *order)``: ahead of every lane's, of any priority, since
#: the deciding node reads the returned stream first (:mod:`.dispatch`).
RETURNED_FIRST = -10


@frozen
class Source:
    """
    One stream a queue's messages may wait in.

    :ivar stream: its key.
    :ivar priority: the priority of the lane it is, or ``None`` for a node's
        own stream (whose entries have any priority).
    :ivar owner: the node whose own stream it is, or ``None`` for a lane.
    :ivar returned: whether it is the queue's returned stream (no priority,
        no owner).
    """

    stream: str
    priority: int | None
    owner: str | None = None
    returned: bool = False


@frozen
class QueueSources:
    """
    The streams a queue's messages wait in now, and who holds entries of them.

    :ivar sources: the lanes that exist, highest priority first, then the
        returned stream if it exists, then the nodes' own streams that exist.
    :ivar others: the live nodes other than this one that hold entries of a
        source or have consumers of the queue: those to ask.
    :ivar dead: the nodes that hold entries or have consumers registered and
        whose liveness key has expired: what they hold waits.
    """

    sources: tuple[Source, ...]
    others: frozenset[str]
    dead: tuple[str, ...]

    @property
    def lanes(self) -> tuple[Source, ...]:
        """The lanes among the sources, highest priority first."""
        return tuple(source for source in self.sources if source.priority is not None)

    @property
    def returned(self) -> tuple[Source, ...]:
        """The returned stream among the sources, if it exists."""
        return tuple(source for source in self.sources if source.returned)

    @property
    def own(self) -> tuple[Source, ...]:
        """The nodes' own streams among the sources."""
        return tuple(source for source in self.sources if source.owner is not None)


def entry_order(entry_id: Any) -> tuple[int, int]:
    """:returns: a stream entry id as a key that sorts as Redis orders ids."""
    text = entry_id.decode() if isinstance(entry_id, bytes) else str(entry_id)
    millis, _, sequence = text.partition("-")
    return int(millis), int(sequence or 0)


def original_order(entry_id: Any, fields: Any) -> tuple[int, int]:
    """
    :returns: where an entry stands in its queue's order: by the id its
        message first had in a lane (field ``i`` of an entry a deciding node
        moved to a node's own stream, or that came back to a lane's tail), else
        by its own id; entries of one priority sort so in the order sent.
    """
    return entry_order(fields.get(b"i", entry_id) if fields else entry_id)


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


async def find_sources(engine: Any, destination: str) -> QueueSources:
    """:returns: where ``destination``'s messages wait now, and who holds them."""
    client = engine.client
    names = engine.names
    prefix = names.prefix
    me = engine.ids.node
    lanes = [
        Source(lane_stream(prefix, destination, priority), priority) for priority in LANE_ORDER
    ]
    lanes.append(Source(returned_stream(prefix, destination), None, returned=True))
    pipe = client.pipeline(transaction=False)
    for lane in lanes:
        pipe.exists(lane.stream)
    pipe.hkeys(registry_key(prefix, destination))
    replies = await pipe.execute()
    registered = {_text(field).rpartition("/")[0] for field in replies[-1]}
    found = [lane for lane, exists in zip(lanes, replies, strict=False) if exists]
    own = [
        Source(node_stream(prefix, node, destination), None, node)
        for node in sorted(registered | {me})
    ]
    pipe = client.pipeline(transaction=False)
    for source in found:
        pipe.xpending(source.stream, names.group)
    for source in own:
        pipe.exists(source.stream)
        pipe.xpending(source.stream, names.group)
    replies = await pipe.execute(raise_on_error=False)
    holding = set(registered)
    lanes_found = len(found)
    summaries = replies[:lanes_found]
    for index, source in enumerate(own):
        exists, summary = replies[lanes_found + 2 * index : lanes_found + 2 * index + 2]
        if exists and not isinstance(exists, Exception):
            found.append(source)
            summaries.append(summary)
    for summary in summaries:
        if isinstance(summary, dict):
            holding.update(_text(holder["name"]) for holder in summary.get("consumers") or ())
    holding.discard(me)
    candidates = sorted(holding)
    alive: list[Any] = []
    if candidates:
        pipe = client.pipeline(transaction=False)
        for node in candidates:
            pipe.exists(names.alive(node))
        alive = await pipe.execute()
    others = frozenset(node for node, live in zip(candidates, alive, strict=True) if live)
    dead = tuple(node for node, live in zip(candidates, alive, strict=True) if not live)
    return QueueSources(tuple(found), others, dead)
