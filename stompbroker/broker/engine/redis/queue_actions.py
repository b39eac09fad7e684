"""
The management's purge, move, copy and dead-letter retry of a ``/queue/``
shared by every node: they act on every message that waits, in Redis or read
ahead (not yet handed out) by any node (docs/cluster.md, "Management across
nodes").

A message waits when it is in the queue's stream and no live node has handed
it to a consumer: an entry no node has read, one a dead node holds (it goes to
a consumer once claimed), or one a live node read ahead.  Only a node knows
which of the entries it holds it has handed out, so the node that answers:

1. asks every live node holding entries of the stream (and itself) to *give
   back* what it read ahead (``XADD`` at the tail, ``XACK``/``XDEL`` of the old
   entry) and to read nothing more of the queue until told to :data:`RESUME`
   (at most :data:`~.control.HOLD` seconds): from then on, every entry a live
   node holds was handed to a consumer, and is not waiting;
2. acts on the stream in pages of :data:`PAGE` entries, each page one script
   that, entry by entry, checks that nobody but a dead node holds it
   (``XPENDING stream nodes ID ID 1``) before it acts: :data:`PURGE` deletes
   it (``XDEL``; and ``XACK`` of a dead node's), :data:`MOVE` adds the new message
   the node made of it to the target queue's stream (``XADD``) and deletes it;
3. tells the nodes to read on.

A delete (:meth:`ClusterQueueActions.delete`) is refused while any node has a
consumer of the queue (its consumer registry, :mod:`.consumer_registry`, is not
empty); otherwise it purges as above and, only when every node holding entries
answered, runs :data:`DELETE`: the queue's stream and priority lanes are
deleted (unless a consumer registered meanwhile), and the nodes are told
:data:`~.control.DELETED` instead of to read on, so that each drops its handle.

A node that does not answer within :data:`~.control.ANSWER_TIMEOUT` keeps what
it holds (the scripts skip a live node's entries): the answer names it
(``missing``), and counts only what was acted on.  A copy changes nothing, so it
gives nothing back: it copies what a browse would show
(:meth:`~.control.ControlChannel.snapshot`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from attrs import frozen
from redis.exceptions import ResponseError
from twisted.internet.defer import Deferred

from stompbroker.broker.engine.redis.codec import decode, encode
from stompbroker.broker.engine.redis.connection import run
from stompbroker.broker.engine.redis.consumer_registry import registry_key
from stompbroker.broker.engine.redis.control import (
    DELETED,
    GIVE_BACK,
    HOLD,
    RESUME,
    pending_summary,
)
from stompbroker.broker.engine.redis.lanes import lane_streams
from stompbroker.broker.engine.redis.queues import StreamQueue
from stompbroker.broker.engine.redis.shared_bytes import BODY_SIZE, byte_counter
from stompbroker.broker.engine.shared_queues import Acted, QueueConsumed
from stompbroker.broker.features.browsing import Waiting
from stompbroker.broker.routing.destinations import TOPIC_PREFIX
from stompbroker.protocol.frames import Headers
from stompbroker.protocol.message import Message

__all__ = ["DELETE", "MOVE", "PAGE", "PURGE", "ClusterQueueActions", "new_message"]

#: Entries one script looks at.
PAGE = 500

#: Whether nobody but a dead node (ARGV names them after their count) holds an
#: entry of the stream KEYS[1] in group ARGV[1]: the scripts' shared check.
_FREE = """
local function free(stream, group, id, dead)
  local held = redis.pcall('XPENDING', stream, group, id, id, 1)
  if type(held) ~= 'table' or held.err or #held == 0 then
    return true, false
  end
  return dead[held[1][2]] == true, true
end
"""

#: Take bytes off a stream's byte counter (:mod:`.shared_bytes`), if it has one.
_UNCOUNT = """
local function uncount(counter, gone)
  if gone > 0 and redis.call('EXISTS', counter) == 1 then
    if redis.call('DECRBY', counter, gone) < 0 then redis.call('SET', counter, 0) end
  end
end
"""

#: Purge one page: KEYS[1] the stream, KEYS[2] its byte counter; ARGV: group,
#: start, count, dead nodes.  Returns {purged, last id looked at, entries looked at}.
PURGE = (
    _FREE
    + BODY_SIZE
    + _UNCOUNT
    + """
local dead = {}
for i = 4, #ARGV do dead[ARGV[i]] = true end
local page = redis.call('XRANGE', KEYS[1], ARGV[2], '+', 'COUNT', ARGV[3])
local purged, last, gone = 0, '', 0
for _, entry in ipairs(page) do
  last = entry[1]
  local ok, pending = free(KEYS[1], ARGV[1], last, dead)
  if ok then
    if pending then redis.call('XACK', KEYS[1], ARGV[1], last) end
    redis.call('XDEL', KEYS[1], last)
    gone = gone + entry_size(entry[2])
    purged = purged + 1
  end
end
uncount(KEYS[2], gone)
return {purged, last, #page}
"""
)

#: Move (or copy) chosen entries: KEYS[1] the stream, KEYS[2] its byte counter;
#: ARGV: group, copy (1/0), the number of dead nodes and their names, then per
#: entry its id, the target stream ('' for a topic: the node publishes it), the
#: target's byte counter and the new message.  Returns the ids acted on.
MOVE = (
    _FREE
    + BODY_SIZE
    + _UNCOUNT
    + """
local dead = {}
local ndead = tonumber(ARGV[3])
for i = 4, 3 + ndead do dead[ARGV[i]] = true end
local done = {}
local gone = 0
for i = 4 + ndead, #ARGV, 4 do
  local id, target, counter, payload = ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3]
  if #redis.call('XRANGE', KEYS[1], id, id) > 0 then
    local ok, pending = free(KEYS[1], ARGV[1], id, dead)
    if ok then
      local size = body_size(payload)
      if target ~= '' then
        redis.call('XADD', target, '*', 'm', payload)
        if redis.call('EXISTS', counter) == 1 then redis.call('INCRBY', counter, size) end
      end
      if ARGV[2] == '0' then
        if pending then redis.call('XACK', KEYS[1], ARGV[1], id) end
        redis.call('XDEL', KEYS[1], id)
        gone = gone + size
      end
      done[#done + 1] = id
    end
  end
end
uncount(KEYS[2], gone)
return done
"""
)

#: Delete a queue's streams: KEYS[1] its consumer registry, then each of its
#: streams (the queue's and its lanes') followed by its byte counter.  Returns
#: -1 (and deletes nothing) when a consumer registered meanwhile, else how many
#: entries the streams held.
DELETE = """
if redis.call('HLEN', KEYS[1]) > 0 then return -1 end
local held = 0
for i = 2, #KEYS, 2 do
  if redis.call('EXISTS', KEYS[i]) == 1 then
    held = held + redis.call('XLEN', KEYS[i])
  end
  redis.call('DEL', KEYS[i], KEYS[i + 1])
end
return held
"""

Route = Callable[[Message], "tuple[str, Headers] | None"]


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


@frozen
class _Holders:
    """Who holds entries of a stream: the live nodes other than this one, and the dead."""

    others: frozenset[str]
    dead: tuple[str, ...]


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


class ClusterQueueActions:
    """
    Purge, move, copy and retry on a ``/queue/`` across every node.

    :param engine: the :class:`~stompbroker.broker.engine.redis.engine.RedisEngine`.
    """

    def __init__(self, engine: Any) -> None:
        self._engine = engine
        self._purge = engine.client.register_script(PURGE)
        self._move = engine.client.register_script(MOVE)
        self._delete = engine.client.register_script(DELETE)

    def exists(self, destination: str) -> Deferred[bool]:
        """:returns: whether ``destination``'s stream exists (or this node reads it)."""
        return run(self._engine.loop, self._exists(destination))

    async def _exists(self, destination: str) -> bool:
        engine = self._engine
        if destination in engine.queues:
            return True
        return bool(await engine.client.exists(engine.names.queue(destination)))

    def browse(self, destination: str, count: int) -> Deferred[Waiting]:
        """:returns: the first ``count`` messages waiting, cluster-wide."""
        return run(self._engine.loop, self._browse(destination, count))

    async def _browse(self, destination: str, count: int) -> Waiting:
        waiting = (await self._engine.control.snapshot(destination)).waiting
        return Waiting(waiting.messages[:count], waiting.node, waiting.missing)

    def purge(self, destination: str) -> Deferred[Acted]:
        """Discard every message waiting in ``destination``'s queue, cluster-wide."""
        return run(self._engine.loop, self._held(destination, self._purge_stream))

    def delete(self, destination: str) -> Deferred[Acted]:
        """
        Delete ``destination``'s queue cluster-wide, with every message it holds.

        :returns: a Deferred of what was discarded; ``complete`` false (and the
            queue still there, less what was purged) when a node holding entries
            did not answer in time.  It fails with :class:`QueueConsumed` while
            any node has a consumer of the queue.
        """
        return run(self._engine.loop, self._deleted(destination))

    async def _deleted(self, destination: str) -> Acted:
        engine = self._engine
        registry = registry_key(engine.names.prefix, destination)
        consumers = int(await engine.client.hlen(registry))
        if consumers:
            raise QueueConsumed(destination, consumers)

        async def purge_and_delete(
            stream: str, dead: tuple[str, ...], missing: tuple[str, ...]
        ) -> tuple[int, int]:
            purged, _ = await self._purge_stream(stream, dead, missing)
            if missing:
                return purged, 0
            prefix = engine.names.prefix
            keys = [registry]
            for lane in lane_streams(prefix, stream, destination):
                keys += [lane, byte_counter(prefix, lane)]
            held = int(await self._delete(keys=keys, args=[], client=engine.client))
            if held < 0:
                raise QueueConsumed(destination, int(await engine.client.hlen(registry)))
            return purged + held, 0

        return await self._held(destination, purge_and_delete, deleting=True)

    def transfer(self, destination: str, count: int, route: Route, copy: bool) -> Deferred[Acted]:
        """
        Move (or copy) the first ``count`` waiting messages where ``route`` says
        (see :meth:`IEngine.transfer <stompbroker.broker.engine.base.IEngine.transfer>`).

        :returns: what was done; ``left`` counts the messages ``route`` left.
        """
        if copy:
            return run(self._engine.loop, self._copy(destination, count, route))

        async def move(
            stream: str, dead: tuple[str, ...], missing: tuple[str, ...]
        ) -> tuple[int, int]:
            return await self._move_stream(stream, dead, count, route)

        return run(self._engine.loop, self._held(destination, move))

    # -- the steps ------------------------------------------------------------------------

    async def _holders(self, stream: str) -> _Holders:
        engine = self._engine
        client = engine.client
        names = engine.names
        summary = await pending_summary(client, stream, names.group)
        others, dead = set(), []
        for holder in summary.get("consumers") or ():
            name = _text(holder["name"])
            if name == engine.ids.node:
                continue
            if await client.exists(names.alive(name)):
                others.add(name)
            else:
                dead.append(name)
        return _Holders(frozenset(others), tuple(sorted(dead)))

    async def _held(self, destination: str, act: Any, *, deleting: bool = False) -> Acted:
        """
        Have every node give back what it read ahead of ``destination`` and hold
        its reading, run ``act(stream, dead nodes, missing nodes)``, then let
        them read on (or, ``deleting`` and none missing, drop their handles).
        """
        engine = self._engine
        stream = engine.names.queue(destination)
        holders = await self._holders(stream)
        mine = engine.queues.get(destination)
        if isinstance(mine, StreamQueue):
            mine.give_back_for(HOLD)
        finish = RESUME
        try:
            answers = await engine.control.ask(GIVE_BACK, destination, set(holders.others))
            missing = tuple(sorted(holders.others - set(answers)))
            # This node's give-back first: the scripts run on another connection.
            await engine.writer.command_waited("PING").asFuture(engine.loop)
            count, left = await act(stream, holders.dead, missing)
            if deleting and not missing:
                finish = DELETED
        finally:
            if isinstance(mine, StreamQueue):
                engine.control.ended(mine, deleted=finish == DELETED)
            engine.control.tell(finish, destination)
        return Acted(count, engine.ids.node, missing, left)

    async def _purge_stream(
        self, stream: str, dead: tuple[str, ...], missing: tuple[str, ...] = ()
    ) -> tuple[int, int]:
        engine = self._engine
        start, purged = "-", 0
        while True:
            reply = await self._purge(
                keys=[stream, byte_counter(engine.names.prefix, stream)],
                args=[engine.names.group, start, PAGE, *dead],
                client=engine.client,
            )
            purged += int(reply[0])
            if int(reply[2]) < PAGE:
                return purged, 0
            start = "(" + _text(reply[1])

    async def _move_stream(
        self, stream: str, dead: tuple[str, ...], count: int, route: Route
    ) -> tuple[int, int]:
        """Move the first ``count`` free entries, a page (one script) at a time."""
        engine = self._engine
        client = engine.client
        names = engine.names
        start, moved, left = "-", 0, 0
        while moved + left < count:
            page = await client.xrange(stream, min=start, max="+", count=PAGE)
            holders = await self._pending(stream, page)
            chosen: list[tuple[bytes, Message]] = []
            args: list[Any] = [names.group, "0", len(dead), *dead]
            for entry_id, fields in page:
                if moved + left + len(chosen) >= count:
                    break
                if not fields or b"m" not in fields:
                    continue
                holder = holders.get(entry_id)
                if holder is not None and holder not in dead:
                    continue
                message = decode(fields[b"m"])[1]
                target = route(message)
                if target is None:
                    left += 1
                    continue
                new = new_message(message, *target, engine.books.ids.new_message_id())
                queue = not new.destination.startswith(TOPIC_PREFIX)
                chosen.append((entry_id, new))
                target_stream = names.queue(new.destination) if queue else ""
                args.extend(
                    [
                        entry_id,
                        target_stream,
                        byte_counter(names.prefix, target_stream) if queue else "",
                        encode(engine.ids.node, new),
                    ]
                )
            if chosen:
                keys = [stream, byte_counter(names.prefix, stream)]
                done = set(await self._move(keys=keys, args=args, client=client))
                for entry_id, new in chosen:
                    if entry_id in done:
                        moved += 1
                        self._sent(new)
            if len(page) < PAGE:
                break
            start = "(" + _text(page[-1][0])
        return moved, left

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

    def _sent(self, new: Message) -> None:
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

    async def _copy(self, destination: str, count: int, route: Route) -> Acted:
        engine = self._engine
        waiting = (await engine.control.snapshot(destination)).waiting
        copied, left = 0, 0
        for message in waiting.messages[:count]:
            target = route(message)
            if target is None:
                left += 1
                continue
            new = new_message(message, *target, engine.books.ids.new_message_id())
            if new.destination.startswith(TOPIC_PREFIX):
                self._sent(new)
            else:
                engine.traffic.published(new)
                engine.writer.command(
                    "XADD",
                    engine.names.queue(new.destination),
                    "*",
                    "m",
                    encode(engine.ids.node, new),
                )
            copied += 1
        return Acted(copied, waiting.node, waiting.missing, left)
