"""
How a node reads a shared queue: its one stream, or its priority lanes.

A node's reader asks :meth:`QueueReading.read` for as many entries as its
consumers have room for.  A queue that never had a message of other than the
default priority is read as it always was, with one ``XREADGROUP ... BLOCK``;
the read is pipelined with an ``HMGET`` of the queue's mode hash, which Redis
answers after the read returns, so the reader learns in the same round trip
that the queue has lanes (:mod:`~stompbroker.broker.engine.redis.lanes`) and
reads them from then on, highest first, with one script.  That read and its
``HMGET`` go through :mod:`.wire` (one write, the raw replies read at once),
not redis-py's pipeline and its parsing of each entry.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from redis.exceptions import ResponseError

from stompbroker.broker.engine.redis.cluster_dispatch import DECIDE_READ
from stompbroker.broker.engine.redis.keys import lane_streams, mode_key
from stompbroker.broker.engine.redis.lanes import READ_LANES, parse_read
from stompbroker.broker.engine.redis.scripts import run_script
from stompbroker.broker.engine.redis.wire import REPLY_TIMEOUT, execute, pack

__all__ = ["QueueReading"]

#: Milliseconds a read waits on an empty queue before its reader looks at its consumers again.
READ_BLOCK_MS = 1000
READ_BLOCK_S = READ_BLOCK_MS / 1000

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

    __slots__ = (
        "_engine",
        "_destination",
        "_stream",
        "_mode",
        "_lanes",
        "lanes",
        "_known",
        "dispatch",
        "_screen",
    )

    def __init__(
        self,
        engine: Any,
        destination: str | None,
        stream: str,
        dispatch: Any = None,
        screen: Callable[[str, list[Any]], list[Any]] | None = None,
    ) -> None:
        self._engine = engine
        #: The queue's :class:`~.dispatch.ClusterDispatch`, or ``None`` for a durable's.
        self.dispatch = dispatch
        #: Drops, before they are decided, the entries the node holds or ended
        #: lately (Redis handing them out again after a restart).
        self._screen = screen
        self._stream = stream
        self._destination = destination
        prefix = engine.names.prefix
        self._mode = None if destination is None else mode_key(prefix, destination)
        self._lanes = [] if destination is None else lane_streams(prefix, destination)
        self.lanes = False
        #: Whether the mode hash was read since this reading began.
        self._known = self._mode is None

    def streams(self) -> list[str]:
        """:returns: the streams the queue's entries may be in, for claiming from dead nodes."""
        return list(self._lanes) if self.lanes else [self._stream]

    def own_streams(self) -> list[str]:
        """
        :returns: the streams whose pending lists may hold entries this node
            read: the queue's (or its lanes), and this node's own stream of it
            once made (:mod:`.dispatch`), for reconciling.
        """
        streams = self.streams()
        dispatch = self.dispatch
        if dispatch is not None and dispatch.own_made:
            streams.append(dispatch.own)
        if dispatch is not None and dispatch.returned_made:
            streams.append(dispatch.returned)
        return streams

    async def _modes(self, reply: Any) -> None:
        """Take in the queue's modes (an ``HMGET`` of ``p``, ``v``, ``g``)."""
        self._known = True
        if reply[0]:
            self.lanes = True
        dispatch = self.dispatch
        if dispatch is not None and dispatch.observe(reply[1:]):
            await dispatch.refresh()

    def _sources(self) -> list[str]:
        """
        The streams a plain read takes from: the queue's; once deciding, this
        node's own, and the returned one and the queue's only while this node
        holds the lease.
        """
        dispatch = self.dispatch
        if dispatch is not None and dispatch.active:
            streams: list[str] = dispatch.lead_streams()
            return [*streams, self._stream] if dispatch.leading else streams
        return [self._stream]

    def room(self, room: int) -> int:
        """
        :param room: what this node's consumers have room for.
        :returns: how much to read: the deciding node reads for every node.
        """
        dispatch = self.dispatch
        if dispatch is not None and dispatch.active and dispatch.leading:
            return max(room, DECIDE_READ)
        return room

    async def read(self, room: int) -> Read:
        """
        Read up to ``room`` new entries for this node, waiting up to
        :data:`READ_BLOCK_MS` for some; while the queue's consumers or messages
        ask for it, only those decided for this node's consumers (:mod:`.dispatch`).

        :raises ResponseError: ``NOGROUP`` for a stream whose group is gone (the
            caller makes it again and reads again).
        """
        dispatch = self.dispatch
        if dispatch is None:
            return await self._read(room)
        # The switch from plain reading to deciding (:mod:`.group_switch`).
        switch = dispatch.switch
        plain = await switch.before_read(self._modes)
        runs: Read = await switch.after_read(await self._read(room), plain)
        if not dispatch.active:
            return runs
        screen = self._screen
        if screen is not None:
            runs = [(stream, screen(stream, entries)) for stream, entries in runs]
        if dispatch.held and dispatch.changed:
            dispatch.changed = False
            runs = dispatch.take_held() + runs
        decided: Read = await dispatch.decide(runs)
        return decided

    async def _read(self, room: int) -> Read:
        engine = self._engine
        # Reads that claim entries never go again by themselves: a reply lost
        # with the connection must fail, so that the node reconciles its
        # pending lists (:meth:`.queues.StreamQueue.reconcile`).
        client = engine.unretried
        if not self._known:
            await self._modes(await client.hmget(self._mode, "p", "v", "g"))
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
        dispatch = self.dispatch
        if dispatch is not None and dispatch.active:
            await dispatch.lead()
            await dispatch.ready()
        sources = self._sources()
        read = (
            *("XREADGROUP", "GROUP", engine.names.group, engine.ids.node, "COUNT", room),
            *("BLOCK", READ_BLOCK_MS, "STREAMS", *sources, *(">",) * len(sources)),
        )
        # The stream's length, answered after the read, tells whether the queue
        # takes in faster than its consumers take out (:mod:`.queue_credit`).
        commands = [read, ("HMGET", self._mode, "p", "v", "g"), ("XLEN", self._stream)]
        reply, modes, length = await execute(
            client, pack(commands), 3, REPLY_TIMEOUT + READ_BLOCK_S
        )
        if isinstance(reply, ResponseError):
            if dispatch is None or "UNBLOCKED" not in str(reply):
                raise reply
            # This node's own stream was handed back (it left) while read: make it again.
            dispatch.own_made = False
            return []
        if isinstance(modes, ResponseError):
            raise modes
        runs = runs_of(reply)
        if isinstance(length, int) and self._destination is not None:
            engine.credit.measured(self._destination, length, sum(len(got) for _, got in runs))
        await self._modes(modes)
        return runs

    async def _read_lanes(self, room: int) -> Read:
        """One :data:`READ_LANES` script; when it finds nothing, wait for a new entry."""
        engine = self._engine
        lanes = self._lanes
        dispatch = self.dispatch
        if dispatch is not None and dispatch.active:
            await dispatch.lead()
            await dispatch.ready()
            own = dispatch.lead_streams()
            lanes = [*own, *lanes] if dispatch.leading else own
        args = [engine.names.group, engine.ids.node, room]
        # A plain read reads nothing once the queue had a grouped message.
        plain = dispatch is not None and not dispatch.active
        keys = [*lanes, self._mode] if plain else lanes
        reply = await run_script(
            engine.unretried, READ_LANES, len(keys), *keys, *args, *([1] if plain else [])
        )
        entries, newest = parse_read(reply, lanes)
        if not newest and not entries:
            await self._modes(await engine.unretried.hmget(self._mode, "p", "v", "g"))
            return []
        if not entries:
            # Takes nothing: only waits until any lane has an entry newer than its newest.
            pipe = engine.unretried.pipeline(transaction=False)
            pipe.xread(dict(zip(lanes, newest, strict=True)), count=1, block=READ_BLOCK_MS)
            pipe.hmget(self._mode, "p", "v", "g")
            _, modes = await pipe.execute()
            await self._modes(modes)
            return []
        runs: Read = []
        for lane, entry_id, fields in entries:
            if not runs or runs[-1][0] != lane:
                runs.append((lane, []))
            runs[-1][1].append((entry_id, fields))
        return runs


def runs_of(reply: Any) -> Read:
    """
    :returns: the runs of an ``XREADGROUP`` reply as Redis gave it (a map of
        streams in RESP3, pairs in RESP2; ``None`` when nothing came), each
        entry ``(id, {field: value})`` as redis-py would give it.
    """
    if not reply:
        return []
    runs: Read = []
    for stream, entries in reply.items() if isinstance(reply, dict) else reply:
        # An entry of one field (m, a queue's) made here, without a call per entry.
        taken = [
            (entry_id, {fields[0]: fields[1]} if fields and len(fields) == 2 else _fields(fields))
            for entry_id, fields in entries
        ]
        runs.append((_name(stream), taken))
    return runs


def _fields(fields: Any) -> dict[bytes, Any]:
    """:returns: an entry's field list as a dict; ``{}`` for an entry deleted meanwhile."""
    if not fields:
        return {}
    if len(fields) == 2:
        return {fields[0]: fields[1]}
    return dict(zip(fields[::2], fields[1::2], strict=True))


def _name(stream: Any) -> str:
    name: str = stream.decode() if isinstance(stream, bytes) else stream
    return name
