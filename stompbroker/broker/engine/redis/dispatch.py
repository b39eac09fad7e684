"""
Who gets a shared queue's message when its consumers ask for more than
round-robin: selectors, consumer priorities, exclusive consumers, message groups.

A queue whose registered consumers (:mod:`.consumer_registry`) are all plain and
that never had a grouped message is read as before: each node reads what its
own consumers have room for.  Once one asks for more, every node that reads an
entry of the queue decides, from the registry, which node's consumer should
get it (:meth:`ClusterDispatch.decide`):

- the candidates are the exclusive (active) consumer alone while there is one,
  else every consumer, highest priority first; with selectors, only those that
  select the message;
- this node keeps the entry when one of its own consumers is the first
  candidate and has room; otherwise one script (:data:`MOVE`), for the whole
  batch read, gives each entry to the first candidate node that has nothing
  waiting unread in its own stream (``PREFIX:qn:NODE:/queue/NAME``; the first
  candidate when all do), moving it there (``XADD`` there, ``XACK`` and
  ``XDEL`` of the entry read); a message of a group goes to its group's owner
  node (the hash ``PREFIX:qg:/queue/NAME``, group -> node), set atomically by
  the same script when it has none, moved to the exclusive consumer's node
  when that one took over;
- an entry no consumer accepts stays pending on this node, outside its local
  queue, and is decided again when the registry changes.

Each node reads its own stream with its queue's stream in one ``XREADGROUP``.
A node that leaves a queue, or dies, hands back what its own stream holds to the
queue's stream (:data:`RETURN_NODE`: delivered entries with their delivery
count), and its registry entries and groups are forgotten
(:data:`~.consumer_registry.FORGET_NODE`), so the groups move and a standby
consumer takes over.  Within a node, its local queue chooses among its own
consumers with the one-node rules (:mod:`stompbroker.broker.queueing.dispatch`).
"""

from __future__ import annotations

import asyncio
from itertools import count
from typing import Any

from redis.exceptions import ResponseError

from stompbroker.broker.engine.redis.codec import decode
from stompbroker.broker.engine.redis.consumer_registry import (
    FORGET_NODE,
    REGISTER,
    UNREGISTER,
    Registered,
    Roster,
    registry_key,
)
from stompbroker.broker.engine.redis.lanes import mode_key
from stompbroker.broker.engine.redis.shared_bytes import BODY_SIZE, byte_counter
from stompbroker.broker.features.selectors import message_properties
from stompbroker.logs import logger
from stompbroker.protocol.message import Message

__all__ = ["MOVE", "RETURN_NODE", "ClusterDispatch", "candidate_nodes"]

log = logger("stompbroker.broker.engine.redis")

#: KEYS: registry, groups hash.  ARGV: group, node-stream prefix, destination,
#: this node, then per entry: source stream, entry id, payload, message group
#: ('' none), closes group (0/1), active node ('' none), n, then n candidate
#: nodes each with the windows of its consumers there.
#: Answers per entry the node it went to, or '' when none may take it.  An
#: entry moved out of a stream with a byte counter is counted out of it
#: (:mod:`.shared_bytes`; the counter is named from the node-stream prefix).
MOVE = (
    BODY_SIZE
    + """
local group, prefix, destination, me = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local root = string.sub(prefix, 1, #prefix - 3)
local function uncount(source, payload)
  local counter = root .. 'qb:' .. string.sub(source, #root + 1)
  if redis.call('EXISTS', counter) == 1 then
    if redis.call('DECRBY', counter, body_size(payload)) < 0 then redis.call('SET', counter, 0) end
  end
end
local registered = {}
for _, field in ipairs(redis.call('HKEYS', KEYS[1])) do
  registered[string.match(field, '^(.*)/[^/]*$')] = true
end
local function room(node, window)
  if node == me then return true end
  local stream = prefix .. node .. ':' .. destination
  return redis.call('XLEN', stream) < window
end
local answers = {}
local i = 5
while i <= #ARGV do
  local source, id, payload = ARGV[i], ARGV[i + 1], ARGV[i + 2]
  local message_group, closes, active = ARGV[i + 3], ARGV[i + 4], ARGV[i + 5]
  local n = tonumber(ARGV[i + 6])
  local target = nil
  if message_group ~= '' then
    local owner = redis.call('HGET', KEYS[2], message_group)
    if owner and registered[owner] and (active == '' or owner == active) then target = owner end
  end
  if not target then
    local first = nil
    for c = 1, n do
      local node, window = ARGV[i + 5 + 2 * c], tonumber(ARGV[i + 6 + 2 * c])
      if registered[node] then
        first = first or node
        if room(node, window) then target = node break end
      end
    end
    target = target or first
    if target and message_group ~= '' then redis.call('HSET', KEYS[2], message_group, target) end
  end
  if target and message_group ~= '' and closes == '1' then
    redis.call('HDEL', KEYS[2], message_group)
  end
  if target and target ~= me then
    local stream = prefix .. target .. ':' .. destination
    if redis.call('EXISTS', stream) == 0 then
      redis.call('XGROUP', 'CREATE', stream, group, '0', 'MKSTREAM')
    end
    redis.call('XADD', stream, '*', 'm', payload)
    redis.call('XACK', source, group, id)
    redis.call('XDEL', source, id)
    uncount(source, payload)
  end
  answers[#answers + 1] = target or ''
  i = i + 7 + 2 * n
end
return answers
"""
)

#: KEYS: a node's own stream of a queue, the queue's stream, its byte counter.
#: ARGV: group.  Hands everything the node's stream holds back to the queue's
#: stream, in order, a delivered entry with its delivery count (field ``r``),
#: counting it in if the counter exists (:mod:`.shared_bytes`).
RETURN_NODE = (
    BODY_SIZE
    + """
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
local counted = redis.call('EXISTS', KEYS[3]) == 1
local delivered = {}
local ok, rows = pcall(redis.call, 'XPENDING', KEYS[1], ARGV[1], '-', '+', 1000000)
if ok then
  for _, row in ipairs(rows) do delivered[row[1]] = row[4] end
end
local entries = redis.call('XRANGE', KEYS[1], '-', '+')
for _, entry in ipairs(entries) do
  local fields = entry[2]
  local payload = nil
  for f = 1, #fields, 2 do
    if fields[f] == 'm' then payload = fields[f + 1] end
  end
  if payload then
    if counted then redis.call('INCRBY', KEYS[3], body_size(payload)) end
    local times = delivered[entry[1]]
    if times then
      redis.call('XADD', KEYS[2], '*', 'm', payload, 'r', times)
    else
      redis.call('XADD', KEYS[2], '*', 'm', payload)
    end
  end
end
redis.call('DEL', KEYS[1])
return #entries
"""
)


#: KEYS: a queue's decider lease.  ARGV: this node, milliseconds.  Takes or
#: renews the lease; answers whether this node holds it.
LEAD = """
local holder = redis.call('GET', KEYS[1])
if holder == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
if not holder then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  return 1
end
return 0
"""

#: KEYS: a queue's decider lease.  ARGV: this node.  Lets it go if this node holds it.
RESIGN = """
if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('DEL', KEYS[1]) end
return 0
"""

#: Most entries the deciding node reads at once, whatever its own consumers' room.
DECIDE_READ = 200


def candidate_nodes(takers: list[Registered], here: str, room_here: bool) -> list[Any]:
    """
    :param takers: the consumers that may take a message, best first
        (:meth:`~.consumer_registry.Roster.takers`).
    :param room_here: whether this node's consumers have room.
    :returns: their nodes in the order to try, each once, each followed by the
        windows of its takers there (what its own stream may hold unsettled
        before it counts as full): those of the best priority first, this node
        leading them when it has room, and this node left out when it has none
        (its consumers would only keep the message waiting).
    """
    windows: dict[str, int] = {}
    order: list[str] = []
    best = takers[0].priority if takers else 0
    if room_here and any(t.node == here and t.priority == best for t in takers):
        order.append(here)
    for taker in takers:
        if taker.node == here and not room_here:
            continue
        if taker.node not in windows:
            windows[taker.node] = 0
            if taker.node not in order:
                order.append(taker.node)
        windows[taker.node] += taker.window
    flat: list[Any] = []
    for node in order:
        flat += [node, windows[node]]
    return flat


class ClusterDispatch:
    """
    One shared queue's consumers in the registry, and the decisions of this node's reads.

    :param engine: the :class:`~stompbroker.broker.engine.redis.engine.RedisEngine`.
    :param destination: the ``/queue/`` destination.
    :param stream: the queue's stream.
    :param has_room: whether this node's consumers have room now.

    :ivar active: whether reads are decided here (the queue's consumers or
        messages ask for it).
    :ivar own: this node's own stream of the queue.
    """

    def __init__(self, engine: Any, destination: str, stream: str, has_room: Any) -> None:
        self._engine = engine
        prefix = engine.names.prefix
        self.destination = destination
        self.stream = stream
        self._has_room = has_room
        self.registry = registry_key(prefix, destination)
        self.mode = mode_key(prefix, destination)
        self.groups = f"{prefix}:qg:{destination}"
        self.node_prefix = f"{prefix}:qn:"
        self.own = self.node_stream(engine.ids.node)
        self.active = False
        self.grouped = False
        #: Whether this node's own stream and its group were made (:meth:`make_own`).
        self.own_made = False
        self.lease = f"{prefix}:ql:{destination}"
        #: Whether this node holds the lease, the one node that reads the
        #: queue's stream and decides, so that each consumer sees its messages
        #: in the queue's order; and when it last took or renewed it.
        self.leading = False
        self._led_at = -1e9
        self.roster = Roster(())
        self._version: Any = None
        #: Whether the registry changed since the held entries were last decided.
        self.changed = False
        self._fields: dict[Any, str] = {}
        self._numbers = count(1)
        #: Held while what a dead node had is taken over, so that the entries it
        #: held are decided (and a group's go to its new owner) before newer ones.
        self.lock = asyncio.Lock()
        #: Entries no consumer accepts: (stream, entry id, payload), decided again later.
        self.held: list[tuple[str, bytes, bytes]] = []

    def node_stream(self, node: str) -> str:
        """:returns: a node's own stream of this queue."""
        return f"{self.node_prefix}{node}:{self.destination}"

    # -- the registry ------------------------------------------------------------------

    def register(self, consumer: Any, selector: Any, options: Any, window: int) -> None:
        """Register a local consumer (one script through the ordered writer)."""
        field = f"{self._engine.ids.node}/{next(self._numbers)}"
        self._fields[consumer] = field
        single = "" if options is None or options.single_active is None else options.single_active
        self._engine.writer.command(
            "EVAL",
            REGISTER,
            2,
            self.registry,
            self.mode,
            field,
            self._engine.ids.node,
            "" if selector is None else selector.text,
            0 if options is None else options.priority,
            int(options is not None and options.exclusive),
            "" if single == "" else int(bool(single)),
            window,
        )
        if selector is not None or (options is not None and not options.is_plain):
            self.active = True

    def unregister(self, consumer: Any) -> None:
        """Remove a local consumer from the registry."""
        field = self._fields.pop(consumer, None)
        if field is not None:
            self._engine.writer.command("EVAL", UNREGISTER, 2, self.registry, self.mode, field)

    async def make_own(self) -> None:
        """Make this node's own stream of the queue and its group, unless they exist."""
        try:
            await self._engine.client.xgroup_create(
                self.own, self._engine.names.group, id="0", mkstream=True
            )
        except ResponseError as error:
            if "BUSYGROUP" not in str(error):
                raise
        self.own_made = True

    async def lead(self) -> None:
        """Take or renew the lease (every third of ``--node-timeout``), if it is free."""
        engine = self._engine
        now = engine.clock.seconds()
        if self.leading and now - self._led_at < engine.node_timeout / 3:
            return
        lease_ms = int(engine.node_timeout * 1000)
        self.leading = bool(
            await engine.client.eval(LEAD, 1, self.lease, engine.ids.node, lease_ms)
        )
        if self.leading:
            self._led_at = now

    def leave(self) -> None:
        """This node's last consumer left: hand back what its own stream holds."""
        self.own_made = False
        if self.leading:
            self.leading = False
            self._engine.writer.command("EVAL", RESIGN, 1, self.lease, self._engine.ids.node)
        engine = self._engine
        counter = byte_counter(engine.names.prefix, self.stream)
        engine.writer.command(
            "EVAL", RETURN_NODE, 3, self.own, self.stream, counter, engine.names.group
        )

    def observe(self, modes: Any) -> bool:
        """
        Take in the mode hash's ``v`` and ``g`` (read after each read).

        :returns: whether the registry changed since it was last read.
        """
        version, grouped = modes
        if grouped:
            self.grouped = self.active = True
        if version != self._version:
            self.changed = True
            return True
        return False

    async def refresh(self) -> None:
        """Read the registry and which of its nodes live; forget the dead ones'."""
        engine = self._engine
        client = engine.client
        pipe = client.pipeline(transaction=False)
        pipe.hgetall(self.registry)
        pipe.hmget(self.mode, "v", "sa")
        entries, (version, single) = await pipe.execute()
        nodes = {_node_of(field) for field in entries}
        alive = {engine.ids.node}
        for node in nodes - alive:
            if await client.exists(engine.names.alive(node)):
                alive.add(node)
            else:
                await self.forget(node)
        self._version = version
        self.roster = Roster.read(entries, alive, single == b"1")
        self.active = self.active or self.roster.needs_features or self.grouped

    async def forget(self, node: str) -> None:
        """A node is dead: forget its consumers and groups, and hand back its own stream."""
        client = self._engine.client
        await client.eval(FORGET_NODE, 3, self.registry, self.mode, self.groups, node)
        counter = byte_counter(self._engine.names.prefix, self.stream)
        own = self.node_stream(node)
        returned = await client.eval(
            RETURN_NODE, 3, own, self.stream, counter, self._engine.names.group
        )
        if returned:
            log.info(
                "handed back {count} messages of {queue} that dead node {node} was given",
                count=returned,
                queue=self.destination,
                node=node,
            )

    # -- deciding ------------------------------------------------------------------------

    async def decide(self, runs: list[tuple[str, list[Any]]]) -> list[tuple[str, list[Any]]]:
        """As :meth:`decide_locked`, once no dead node's entries are being taken over."""
        async with self.lock:
            return await self.decide_locked(runs)

    async def decide_locked(self, runs: list[tuple[str, list[Any]]]) -> list[tuple[str, list[Any]]]:
        """
        Decide who gets each entry read from the queue's stream (or claimed):
        what stays here is returned; the rest went to other nodes' streams, or
        is held here undecided.

        :param runs: ``(stream, entries)`` as read; this node's own stream's
            entries were decided for it already.
        """
        kept: list[tuple[str, list[Any]]] = []
        batch: list[tuple[str, Any, Any]] = []
        for stream, entries in runs:
            if stream == self.own:
                kept.append((stream, entries))
                continue
            for entry in entries:
                batch.append((stream, entry[0], entry[1]))
        if not batch:
            return kept
        return kept + await self._move([(s, i, f[b"m"], f) for s, i, f in batch if f])

    async def retry_held(self) -> list[tuple[str, list[Any]]]:
        """Decide again the entries nobody took, after the registry changed."""
        held, self.held = self.held, []
        async with self.lock:
            return await self._move([(s, i, p, {b"m": p}) for s, i, p in held])

    async def _move(self, batch: list[tuple[str, Any, bytes, Any]]) -> list[tuple[str, list[Any]]]:
        engine = self._engine
        here = engine.ids.node
        roster = self.roster
        selecting = any(c.selector is not None for c in roster.consumers)
        active = "" if roster.active is None else roster.active.node
        room_here = self._has_room()
        args: list[Any] = [engine.names.group, self.node_prefix, self.destination, here]
        for stream, entry_id, payload, _ in batch:
            _, message = decode(payload)
            properties = message_properties(message) if selecting else None
            nodes = candidate_nodes(roster.takers(properties), here, room_here)
            group, closes = _group_of(message)
            args += [stream, entry_id, payload, group or "", int(closes), active, len(nodes) // 2]
            args += nodes
        answers = await engine.client.eval(MOVE, 2, self.registry, self.groups, *args)
        kept: list[tuple[str, list[Any]]] = []
        for (stream, entry_id, payload, fields), answer in zip(batch, answers, strict=True):
            target = answer.decode() if isinstance(answer, bytes) else answer
            if target == here:
                kept.append((stream, [(entry_id, fields)]))
            elif not target:
                self.held.append((stream, entry_id, payload))
        return kept


def _node_of(field: Any) -> str:
    name: str = field.decode() if isinstance(field, bytes) else field
    return name.rpartition("/")[0]


def _group_of(message: Message) -> tuple[str | None, bool]:
    """:returns: the message's group and whether it closes it."""
    return message.group, message.closes_group
