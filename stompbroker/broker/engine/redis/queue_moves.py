"""
The management's move and dead-letter retry of a shared ``/queue/``'s waiting
messages (:mod:`.queue_actions` runs them once the nodes have given back what
they read ahead): from every stream they wait in (:mod:`.queue_sources`), in
the order one node hands them out, each into the target's lane of its priority.
Within one priority that is the queue's order, whether an entry waits in the
lane, came back to its tail, or waits in a node's own stream
(:func:`~.queue_sources.original_order`), so each priority's lane and the
entries of that priority in the own streams are read whole and merged; a
grouped queue's returned stream goes first, in its order, as the deciding node
reads it before any lane.

The node reads a stream in pages (``XRANGE``, and ``XPENDING`` of each range),
makes each chosen message anew (:func:`new_message`: a new ``message-id``; a
retry's without the dead-letter headers) and runs :data:`MOVE`, one script per
page, which checks each entry again and moves it in one step.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from attrs import define
from redis.exceptions import ResponseError

from stompbroker.broker.engine.redis.codec import decode, encode_entry
from stompbroker.broker.engine.redis.keys import byte_counter, lane_stream, mode_key
from stompbroker.broker.engine.redis.lanes import LANE_ORDER
from stompbroker.broker.engine.redis.queue_sources import QueueSources, original_order
from stompbroker.broker.engine.redis.scripts import load, run_script
from stompbroker.broker.queueing.priorities import DEFAULT_PRIORITY
from stompbroker.broker.routing.destinations import TOPIC_PREFIX
from stompbroker.protocol.frames import Headers
from stompbroker.protocol.message import Message

__all__ = ["MOVE", "PAGE", "QueueMoves", "Route", "new_message"]

#: Entries one script looks at.
PAGE = 500

Route = Callable[[Message], "tuple[str, Headers] | None"]
#: A free entry: its id, its message, and its place in the queue's order.
Free = tuple[bytes, Message, tuple[int, int]]


#: lua/move_entries.lua (what it takes and answers is said there).
MOVE = load("move_entries")


def new_message(message: Message, destination: str, headers: Headers, message_id: str) -> Message:
    """:returns: what a move makes of ``message``: a new message to ``destination``."""
    return Message(
        destination,
        message_id,
        headers,
        message.body,
        message.expires,
        0,
        message.persistent,
        message.priority,
        message.group,
        message.closes_group,
    )


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


@define
class _Done:
    """How far a move is: at most ``count`` entries moved or left by the route."""

    count: int
    moved: int = 0
    left: int = 0

    @property
    def full(self) -> bool:
        return self.moved + self.left >= self.count


class QueueMoves:
    """
    Moves waiting messages of a queue's streams to other destinations.

    :param engine: the :class:`~stompbroker.broker.engine.redis.engine.RedisEngine`.
    """

    def __init__(self, engine: Any) -> None:
        self._engine = engine

    async def move(self, found: QueueSources, count: int, route: Route) -> tuple[int, int]:
        """
        Move the first ``count`` free entries in the order one node hands them
        out: by priority, and within one, in the queue's order, whether an
        entry waits in the lane or in a node's own stream (by its original id:
        :func:`original_order`).
        """
        by_priority: dict[int, list[tuple[tuple[int, int], str, bytes, Message]]] = {}
        for source in found.own:
            for entry_id, message, order in await self._free(source.stream, found.dead):
                by_priority.setdefault(message.priority, []).append(
                    (order, source.stream, entry_id, message)
                )
        lanes = {source.priority: source.stream for source in found.lanes}
        done = _Done(count)
        for source in found.returned:
            free = await self._free(source.stream, found.dead)
            run = [(entry_id, message) for entry_id, message, _ in free]
            await self._move_entries(source.stream, run, found.dead, done, route)
            if done.full:
                return done.moved, done.left
        for priority in LANE_ORDER:
            entries = by_priority.get(priority, [])
            lane = lanes.get(priority)
            if lane is not None:
                entries += [
                    (order, lane, entry_id, message)
                    for entry_id, message, order in await self._free(lane, found.dead)
                ]
            for stream, run in _runs(sorted(entries, key=lambda entry: entry[0])):
                await self._move_entries(stream, run, found.dead, done, route)
            if done.full:
                break
        return done.moved, done.left

    async def _free(self, stream: str, dead: tuple[str, ...]) -> list[Free]:
        """:returns: every entry of ``stream`` no live node holds, in stream order."""
        free = []
        start = "-"
        while True:
            page = await self._engine.client.xrange(stream, min=start, max="+", count=PAGE)
            free += self._free_in(page, await self._pending(stream, page), dead)
            if len(page) < PAGE:
                return free
            start = "(" + _text(page[-1][0])

    @staticmethod
    def _free_in(page: list[Any], holders: dict[bytes, str], dead: tuple[str, ...]) -> list[Free]:
        free = []
        for entry_id, fields in page:
            if not fields or b"m" not in fields:
                continue
            holder = holders.get(entry_id)
            if holder is None or holder in dead:
                message = decode(fields[b"m"])[1]
                free.append((entry_id, message, original_order(entry_id, fields)))
        return free

    async def _move_entries(
        self,
        stream: str,
        entries: list[tuple[bytes, Message]],
        dead: tuple[str, ...],
        done: _Done,
        route: Route,
    ) -> None:
        """Move entries of one stream, in order, until ``done`` is full: one script."""
        engine = self._engine
        names = engine.names
        chosen: list[tuple[bytes, Message]] = []
        args: list[Any] = [names.group, len(dead), *dead]
        for entry_id, message in entries:
            if done.moved + done.left + len(chosen) >= done.count:
                break
            target = route(message)
            if target is None:
                done.left += 1
                continue
            new = new_message(message, *target, engine.books.ids.new_message_id())
            chosen.append((entry_id, new))
            args += [entry_id, *self._target(new), encode_entry(engine.ids.node, new)]
        if chosen:
            keys = [stream, byte_counter(stream)]
            moved = set(await run_script(engine.client, MOVE, len(keys), *keys, *args))
            for entry_id, new in chosen:
                if entry_id in moved:
                    done.moved += 1
                    self.sent(new)

    def _target(self, new: Message) -> list[str]:
        """:returns: the target's stream, counter, sizing, mode hash and marks (:data:`MOVE`)."""
        destination = new.destination
        if destination.startswith(TOPIC_PREFIX):
            return ["", "", "0", "", ""]
        engine = self._engine
        prefix = engine.names.prefix
        if destination not in engine.queue_names.known:
            engine.queue_names.met(destination)
        stream = lane_stream(prefix, destination, new.priority)
        marks = ("p" if new.priority != DEFAULT_PRIORITY else "") + (
            "g" if new.group is not None else ""
        )
        limit = engine.limits.of(destination)
        sized = "1" if limit is not None and limit.max_bytes is not None else "0"
        return [stream, byte_counter(stream), sized, mode_key(prefix, destination), marks]

    async def _pending(self, stream: str, page: list[Any]) -> dict[bytes, str]:
        """:returns: entry id -> its holder, for the entries of ``page`` some node holds."""
        if not page:
            return {}
        engine = self._engine
        try:
            rows = await engine.client.xpending_range(
                stream, engine.names.group, min=page[0][0], max=page[-1][0], count=len(page)
            )
        except ResponseError as error:
            if "NOGROUP" not in str(error):
                raise
            return {}
        return {row["message_id"]: _text(row["consumer"]) for row in rows}

    def sent(self, new: Message) -> None:
        """Count a moved message in; publish one moved to a topic (its script only ended it)."""
        engine = self._engine
        if new.destination.startswith(TOPIC_PREFIX):
            if new.persistent:
                kept = engine.keep(new)
                if kept is not None:
                    kept.addErrback(lambda failure: None)
            engine.publish_topic(new)
        else:
            engine.traffic.published(new)


def _runs(
    entries: list[tuple[Any, str, bytes, Message]],
) -> list[tuple[str, list[tuple[bytes, Message]]]]:
    """:returns: ``entries`` (sorted) cut into runs of one stream: ``(stream, [(id, message)])``."""
    runs: list[tuple[str, list[tuple[bytes, Message]]]] = []
    for _, stream, entry_id, message in entries:
        if not runs or runs[-1][0] != stream:
            runs.append((stream, []))
        runs[-1][1].append((entry_id, message))
    return runs
