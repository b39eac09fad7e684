"""
The redis engine's part in cluster-wide statistics: each node shares its
figures, and reads the others' and what waits in Redis unread.

Every :data:`FIGURES_INTERVAL` seconds a node (:class:`FiguresExchange`):

- ``SET``\\ s ``PREFIX:figures:NODE`` to its own figures (what the statistics
  gave :meth:`~stompbroker.broker.engine.redis.engine.RedisEngine.share`),
  expiring after :data:`FIGURES_TTL` so that a node killed drops out of the sums
  within seconds (a node that stops deletes it);
- reads every node's figures (``SCAN`` then one ``MGET``);
- reads, in one pipeline, ``XINFO STREAM`` of every ``/stream/``'s stream and
  the key counting its bytes (``SCAN PREFIX:{s:*}``): its retained range, the
  first and last entry's ids as offsets;
- reads, in one pipeline, ``XLEN`` and ``XINFO GROUPS`` of every queue's and
  durable subscription's stream, every queue's priority lanes, the nodes'
  own streams of queues and grouped queues' returned streams (``SCAN`` of
  :func:`~.keys.stream_patterns`): what no node has read is the length less the group's
  pending entries (every settled entry is deleted, so a stream holds only what
  is unread or held by a node), summed over a queue's streams.

That is one small pipeline and a few scans a second per node, whatever the
traffic; the statistics read the latest :class:`~stompbroker.broker.engine.node_figures.ClusterView`
without waiting.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from stompbroker.broker.engine.node_figures import ClusterView, NodeFigures, StreamRange
from stompbroker.broker.engine.redis.connection import CONNECTION_ERRORS, run
from stompbroker.broker.engine.redis.keys import stream_destination, stream_patterns
from stompbroker.broker.engine.redis.streams import offset_of
from stompbroker.logs import logger

__all__ = ["FIGURES_INTERVAL", "FiguresExchange", "stream_range"]

log = logger("stompbroker.broker.engine.redis")

#: Seconds between two exchanges of figures.
FIGURES_INTERVAL = 1.0
#: Milliseconds a node's figures outlive their last renewal.
FIGURES_TTL = 3000


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def stream_range(info: Any, size: Any) -> StreamRange:
    """
    :param info: redis-py's ``XINFO STREAM`` reply.
    :param size: the stream's byte counter (``None`` when unset).
    :returns: the range it keeps; when it keeps nothing, the next offset is
        the one after its last id ever given.
    """
    first, last = info.get("first-entry"), info.get("last-entry")
    last_offset = offset_of(last[0]) if last else None
    if first:
        first_offset = offset_of(first[0])
    else:
        first_offset = offset_of(info.get("last-generated-id") or b"0-0") + 1
    return StreamRange(first_offset, last_offset, int(info.get("length", 0)), int(size or 0))


class FiguresExchange:
    """
    Shares this node's figures and keeps the latest view of the others'.

    :param engine: the :class:`~stompbroker.broker.engine.redis.engine.RedisEngine`.
    :ivar source: returns this node's figures, encoded; ``None`` until the
        statistics give one.
    :ivar view: the latest :class:`~stompbroker.broker.engine.node_figures.ClusterView`.
    """

    def __init__(self, engine: Any) -> None:
        self._engine = engine
        self.source: Callable[[], bytes] | None = None
        self.view = ClusterView()
        self._busy = False

    def tick(self) -> None:
        """Exchange figures, unless the previous exchange is still going."""
        if self._busy:
            return
        self._busy = True
        done = run(self._engine.loop, self._exchange())
        done.addErrback(self._failed)
        done.addBoth(self._idle)

    def _idle(self, result: Any) -> None:
        self._busy = False

    def _failed(self, failure: Any) -> None:
        if not failure.check(*CONNECTION_ERRORS):
            log.failure("exchanging figures with the other nodes failed", failure)

    async def _exchange(self) -> None:
        engine = self._engine
        client = engine.client
        names = engine.names
        me = engine.ids.node
        if self.source is not None:
            await client.set(names.figures(me), self.source(), px=FIGURES_TTL)
        keys = [key async for key in client.scan_iter(match=names.figures("*"), count=500)]
        peers = []
        for payload in await client.mget(keys) if keys else ():
            if payload is None:
                continue
            try:
                figures = NodeFigures.decode(payload)
            except ValueError:
                continue
            if figures.node != me:
                peers.append(figures)
        peers.sort(key=lambda figures: figures.node)
        streams = [
            key
            for match in stream_patterns(names.prefix)
            async for key in client.scan_iter(match=match, count=500)
        ]
        unread: dict[str, int] = {}
        if streams:
            pipe = client.pipeline(transaction=False)
            for stream in streams:
                pipe.xlen(stream)
                pipe.xinfo_groups(stream)
            replies = await pipe.execute(raise_on_error=False)
            for index, stream in enumerate(streams):
                length, groups = replies[2 * index], replies[2 * index + 1]
                if isinstance(length, Exception):
                    continue
                pending = 0
                if not isinstance(groups, Exception):
                    pending = sum(int(group.get("pending", 0)) for group in groups)
                destination = names.destination_of(_text(stream))
                unread[destination] = unread.get(destination, 0) + max(int(length) - pending, 0)
        patterns = {queue.key: queue.destination for queue in engine.durables.queues.values()}
        self.view = ClusterView(tuple(peers), unread, patterns, await self._stream_ranges())

    async def _stream_ranges(self) -> dict[str, StreamRange]:
        """:returns: what each ``/stream/`` keeps in the server, by destination."""
        client = self._engine.client
        names = self._engine.names
        found = [_text(key) async for key in client.scan_iter(match=names.stream("*"), count=500)]
        keys = [key for key in found if stream_destination(names.prefix, key) is not None]
        if not keys:
            return {}
        destinations = [str(stream_destination(names.prefix, key)) for key in keys]
        pipe = client.pipeline(transaction=False)
        for key, destination in zip(keys, destinations, strict=True):
            pipe.xinfo_stream(key)
            pipe.get(names.stream_size(destination))
        replies = await pipe.execute(raise_on_error=False)
        ranges = {}
        for index, destination in enumerate(destinations):
            info, size = replies[2 * index], replies[2 * index + 1]
            if not isinstance(info, Exception):
                ranges[destination] = stream_range(info, 0 if isinstance(size, Exception) else size)
        return ranges

    async def leave(self) -> None:
        """Delete this node's figures (it is stopping)."""
        await self._engine.client.delete(self._engine.names.figures(self._engine.ids.node))
