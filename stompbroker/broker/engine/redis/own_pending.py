"""
This node's pending lists in a shared queue's streams, read back when it
reconciles (:meth:`~stompbroker.broker.engine.redis.stream_queue.StreamQueue.reconcile`).

A queue's entries may wait in several streams a node reads: the queue's own,
its priority lanes (:mod:`.lanes`) and the node's own stream of the queue
(:mod:`.dispatch`).  Each has its pending list in the ``nodes`` group; a stream
that has no group yet (a lane nobody has read) holds nothing for this node.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable
from typing import Any

from redis.exceptions import ResponseError

__all__ = ["RECONCILE_PAGE", "owned_entries", "pending_count", "pending_pages"]

#: Most entries of the node's own pending list one read of it takes.
RECONCILE_PAGE = 500


def _no_group(error: ResponseError) -> bool:
    """:returns: whether Redis answered that the stream or its group does not exist."""
    return "NOGROUP" in str(error)


async def pending_count(engine: Any, streams: Iterable[str]) -> int:
    """
    :param engine: the :class:`~stompbroker.broker.engine.redis.engine.RedisEngine`.
    :returns: how many entries the streams' pending lists hold for this node.
    """
    client = engine.client
    group = engine.names.group
    me = engine.ids.node
    total = 0
    for stream in streams:
        try:
            summary = await client.xpending(stream, group)
        except ResponseError as error:
            if not _no_group(error):
                raise
            continue
        for holder in summary.get("consumers") or ():
            name = holder["name"]
            if (name.decode() if isinstance(name, bytes) else name) == me:
                total += int(holder["pending"])
    return total


async def pending_pages(engine: Any, stream: str) -> AsyncIterator[list[Any]]:
    """
    Read this node's pending list of one stream (``XREADGROUP ... 0``), page by
    page, with the client that never sends a command again by itself.

    :param engine: the :class:`~stompbroker.broker.engine.redis.engine.RedisEngine`.
    :returns: pages of ``(entry id, fields)``; a deleted entry's fields are empty.
    """
    start: bytes | str = "0"
    while True:
        try:
            reply = await engine.unretried.xreadgroup(
                engine.names.group, engine.ids.node, {stream: start}, count=RECONCILE_PAGE
            )
        except ResponseError as error:
            if not _no_group(error):
                raise
            return
        entries: list[Any] = []
        for _, page in reply or ():
            entries.extend(page)
        if not entries:
            return
        yield entries
        start = entries[-1][0]
        if len(entries) < RECONCILE_PAGE:
            return


async def owned_entries(engine: Any, streams: Iterable[str]) -> set[tuple[str, bytes]]:
    """
    What the streams' pending lists say this node holds now (``XPENDING ... me``,
    page by page): after its liveness lapsed, the entries another node did not
    claim meanwhile (:meth:`~stompbroker.broker.engine.redis.liveness.Liveness.lapse`).

    :param engine: the :class:`~stompbroker.broker.engine.redis.engine.RedisEngine`.
    :returns: ``(stream, entry id)`` of each.
    """
    client = engine.client
    group = engine.names.group
    me = engine.ids.node
    owned: set[tuple[str, bytes]] = set()
    for stream in streams:
        start = "-"
        while True:
            try:
                rows = await client.xpending_range(
                    stream, group, min=start, max="+", count=RECONCILE_PAGE, consumername=me
                )
            except ResponseError as error:
                if not _no_group(error):
                    raise
                break
            for row in rows:
                entry_id = row["message_id"]
                owned.add((stream, entry_id if isinstance(entry_id, bytes) else entry_id.encode()))
            if len(rows) < RECONCILE_PAGE:
                break
            last = rows[-1]["message_id"]
            start = "(" + (last.decode() if isinstance(last, bytes) else last)
    return owned
