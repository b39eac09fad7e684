"""
How a node reads a shared queue: its one stream, or its priority lanes.

A node's reader asks :meth:`QueueReading.read` for as many entries as its
consumers have room for.  A queue that never had a message of other than the
default priority is read as it always was, with one ``XREADGROUP ... BLOCK``;
the read is pipelined with an ``HMGET`` of the queue's mode hash, which Redis
answers after the read returns, so the reader learns in the same round trip
that the queue has lanes (:mod:`~stompbroker.broker.engine.redis.lanes`) and
reads them from then on, highest first, with one script.
"""

from __future__ import annotations

from typing import Any

from stompbroker.broker.engine.redis.lanes import lane_streams, mode_key, parse_read

__all__ = ["QueueReading"]

#: Milliseconds a read waits on an empty queue before its reader looks at its consumers again.
READ_BLOCK_MS = 1000

#: What one read gives: ``(stream, [(entry id, {b"m": payload})...])`` runs, in order.
Read = list[tuple[str, list[Any]]]


class QueueReading:
    """
    One queue's reading on this node.

    :param engine: the :class:`~stompbroker.broker.engine.redis.engine.RedisEngine`.
    :param destination: the ``/queue/`` destination, or ``None`` for a durable
        subscription's backlog (which has no lanes).
    :param stream: the queue's stream, the default priority's lane.

    :ivar lanes: whether the queue has priority lanes (sticky: a queue's mode
        hash never forgets them).
    """

    __slots__ = ("_engine", "_stream", "_mode", "_lanes", "lanes", "_known")

    def __init__(self, engine: Any, destination: str | None, stream: str) -> None:
        self._engine = engine
        self._stream = stream
        prefix = engine.names.prefix
        self._mode = None if destination is None else mode_key(prefix, destination)
        self._lanes = [] if destination is None else lane_streams(prefix, stream, destination)
        self.lanes = False
        #: Whether the mode hash was read since this reading began.
        self._known = self._mode is None

    def streams(self) -> list[str]:
        """:returns: the streams the queue's entries may be in, for claiming from dead nodes."""
        return list(self._lanes) if self.lanes else [self._stream]

    def _modes(self, reply: Any) -> None:
        """Take in the queue's modes (an ``HMGET`` of ``p``)."""
        self._known = True
        if reply and reply[0]:
            self.lanes = True

    async def read(self, room: int) -> Read:
        """
        Read up to ``room`` new entries for this node, waiting up to
        :data:`READ_BLOCK_MS` for some.

        :raises ResponseError: ``NOGROUP`` for a stream whose group is gone (the
            caller makes it again and reads again).
        """
        engine = self._engine
        client = engine.client
        if not self._known:
            self._modes(await client.hmget(self._mode, "p"))
        if self.lanes:
            return await self._read_lanes(room)
        if self._mode is None:
            reply = await client.xreadgroup(
                engine.names.group,
                engine.ids.node,
                {self._stream: ">"},
                count=room,
                block=READ_BLOCK_MS,
            )
            return [(self._stream, entries) for _, entries in reply or ()]
        pipe = client.pipeline(transaction=False)
        pipe.xreadgroup(
            engine.names.group,
            engine.ids.node,
            {self._stream: ">"},
            count=room,
            block=READ_BLOCK_MS,
        )
        pipe.hmget(self._mode, "p")
        reply, modes = await pipe.execute()
        self._modes(modes)
        return [(self._stream, entries) for _, entries in reply or ()]

    async def _read_lanes(self, room: int) -> Read:
        """One :data:`READ_LANES` script; when it finds nothing, wait for a new entry."""
        engine = self._engine
        script = engine.scripts.read_lanes
        lanes = self._lanes
        reply = await script(keys=lanes, args=[engine.names.group, engine.ids.node, room])
        entries, newest = parse_read(reply, lanes)
        if not entries:
            # Takes nothing: only waits until any lane has an entry newer than its newest.
            await engine.client.xread(
                dict(zip(lanes, newest, strict=True)), count=1, block=READ_BLOCK_MS
            )
            return []
        runs: Read = []
        for lane, entry_id, payload in entries:
            if not runs or runs[-1][0] != lane:
                runs.append((lane, []))
            runs[-1][1].append((entry_id, {b"m": payload}))
        return runs
