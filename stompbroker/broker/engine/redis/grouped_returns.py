"""
A grouped shared queue's give-backs, decided again before any newer message
(docs/cluster.md, "A group's order when its owner leaves"): what a leaving
consumer or node gives back, and what a dead node held, goes to the queue's
returned stream, ``PREFIX:{q:/queue/NAME}:returned``, in one script each, so that no
decision comes between a consumer's leaving and its messages' return.
"""

from __future__ import annotations

from typing import Any

from stompbroker.broker.engine.redis.consumer_registry import FORGET_NODE_FUNCTION
from stompbroker.broker.engine.redis.dispatch_scripts import (
    LAST_DELIVERED,
    REDELIVERIES_OF,
    UNCOUNT,
)
from stompbroker.broker.engine.redis.keys import lane_streams
from stompbroker.broker.engine.redis.shared_bytes import BODY_SIZE

__all__ = ["FORGET_RETURNING", "RETURN_GROUPED", "forget_returning", "give_back_grouped"]

#: Lua (after ``group`` and ``returned`` are set): what a node gives
#: back to a grouped queue goes to the tail of its returned stream, with how
#: often it was delivered (field ``r``) when known, or as the node's
#: redelivery record of it says (:mod:`.redelivery_records`, which goes);
#: ``return_all`` hands back everything a node's own stream holds, in order,
#: and deletes it; ``sweep`` hands back a dead node's pending entries of a stream.
_RETURNING = """
local function records_of(node, stream)
  local key = stream .. ':redeliveries:' .. node
  local recorded = {}
  local flat = redis.call('HGETALL', key)
  for f = 1, #flat, 2 do recorded[flat[f]] = tonumber(flat[f + 1]) end
  redis.call('DEL', key)
  return recorded
end
local function times_of(payload, times, record)
  local own = record and redeliveries_of(payload)
  if own then
    -- the record is the whole count; r is what adds to the payload's own
    return math.max(times or 0, record + 1 - own)
  end
  return times
end
local function add(payload, times)
  if times then
    redis.call('XADD', returned, '*', 'm', payload, 'r', times)
  else
    redis.call('XADD', returned, '*', 'm', payload)
  end
end
local function payload_of(fields)
  for f = 1, #fields, 2 do
    if fields[f] == 'm' then return fields[f + 1] end
  end
  return nil
end
local function return_all(stream, node)
  if redis.call('EXISTS', stream) == 0 then return 0 end
  local recorded = records_of(node, stream)
  local delivered = {}
  local ok, rows = pcall(redis.call, 'XPENDING', stream, group, '-', '+', 1000000)
  if ok then
    for _, row in ipairs(rows) do delivered[row[1]] = row[4] end
  end
  local entries = redis.call('XRANGE', stream, '-', '+')
  for _, entry in ipairs(entries) do
    local payload = payload_of(entry[2])
    if payload then add(payload, times_of(payload, delivered[entry[1]], recorded[entry[1]])) end
  end
  redis.call('DEL', stream)
  return #entries
end
local function id_order(id)
  local ms, seq = string.match(id, '^(%d+)-(%d+)$')
  return tonumber(ms), tonumber(seq)
end
-- above: a switch point; the entries after it were never delivered (group_switch)
local function sweep(stream, node, above)
  if redis.call('EXISTS', stream) == 0 then return 0 end
  local ok, rows = pcall(redis.call, 'XPENDING', stream, group, '-', '+', 1000000, node)
  if not ok then return 0 end
  local recorded = records_of(node, stream)
  local above_ms, above_seq = nil, nil
  if above then above_ms, above_seq = id_order(above) end
  for _, row in ipairs(rows) do
    local found = redis.call('XRANGE', stream, row[1], row[1])[1]
    if found then
      local payload = payload_of(found[2])
      local times = row[4]
      if above_ms then
        local ms, seq = id_order(row[1])
        if ms > above_ms or (ms == above_ms and seq > above_seq) then times = nil end
      end
      if payload then
        add(payload, times_of(payload, times, recorded[row[1]]))
        uncount(stream, payload)
      end
    end
    redis.call('XACK', stream, group, row[1])
    redis.call('XDEL', stream, row[1])
  end
  return #rows
end
"""

#: KEYS: registry, mode hash, the queue's returned stream, this node's own
#: stream of it, the decider's lease, this node's liveness key.  ARGV: group,
#: this node, whether it leaves the queue
#: (0/1), the node's epoch (as :data:`~.queue_settling.GIVE_BACK`'s), k, k
#: registry fields of its consumers that leave, then per message: the stream
#: of its entry ('' none), the entry id, the payload, whether the node keeps a
#: redelivery record of it (0/1).  A message whose entry another node holds
#: now (after a lapse of this one) is left to it.  A grouped queue's give-back, atomic so
#: that no decision comes between a consumer's leaving and its messages' coming
#: back: each message goes to the tail of the returned stream (its entry
#: ended, counted out of its stream's bytes); then, leaving, everything the
#: node's own stream still holds (as :data:`RETURN_NODE`) and the lease; else
#: what the own stream holds unread for the consumers that leave (field
#: ``o``); then the consumers are unregistered.  Answers the ids of the
#: entries left to other nodes.
RETURN_GROUPED = (
    BODY_SIZE
    + REDELIVERIES_OF
    + """
local group, me = ARGV[1], ARGV[2]
local leaving = ARGV[3] == '1'
local checked = redis.call('GET', KEYS[6]) ~= ARGV[4]
local k = tonumber(ARGV[5])
local returned = KEYS[3]
"""
    + UNCOUNT
    + LAST_DELIVERED
    + _RETURNING
    + """
local foreign = {}
local i = 6 + k
while i <= #ARGV do
  local source, id, payload = ARGV[i], ARGV[i + 1], ARGV[i + 2]
  local row = checked and id ~= '' and redis.pcall('XPENDING', source, group, id, id, 1)
  if type(row) == 'table' and row[1] and row[1][2] ~= me then
    foreign[#foreign + 1] = id
  else
    add(payload, nil)
    if id ~= '' then
      redis.call('XACK', source, group, id)
      redis.call('XDEL', source, id)
      uncount(source, payload)
      if ARGV[i + 3] == '1' then redis.call('HDEL', source .. ':redeliveries:' .. me, id) end
    end
  end
  i = i + 4
end
if leaving then
  return_all(KEYS[4], me)
  if redis.call('GET', KEYS[5]) == me then redis.call('DEL', KEYS[5]) end
elseif k > 0 and redis.call('EXISTS', KEYS[4]) == 1 then
  local leavers = {}
  for f = 6, 5 + k do leavers[ARGV[f]] = true end
  local last = last_delivered(KEYS[4], group)
  for _, entry in ipairs(redis.call('XRANGE', KEYS[4], '(' .. last, '+')) do
    local payload, owner = nil, nil
    for f = 1, #entry[2], 2 do
      if entry[2][f] == 'm' then payload = entry[2][f + 1] end
      if entry[2][f] == 'o' then owner = entry[2][f + 1] end
    end
    if payload and owner and leavers[owner] then
      add(payload, nil)
      redis.call('XDEL', KEYS[4], entry[1])
    end
  end
end
local gone = 0
for f = 6, 5 + k do gone = gone + redis.call('HDEL', KEYS[1], ARGV[f]) end
if gone > 0 then redis.call('HINCRBY', KEYS[2], 'v', 1) end
return foreign
"""
)

#: KEYS: registry, mode hash, groups hash, the queue's returned stream, the
#: dead node's own stream of it, its liveness key, the decider's lease, then
#: the queue's stream and lanes.  ARGV: group,
#: the dead node, the queue's stream.  A grouped queue's dead node, at once and only while its
#: liveness key is gone: what it held goes to the tail of the returned stream
#: in the order it got it (its own stream first if it was the decider, which
#: never moves entries to itself, so that its stream holds the older ones;
#: else last), with how often each was delivered, and its consumers and groups
#: are forgotten (as :data:`~.consumer_registry.FORGET_NODE`); what it left
#: pending above the switch point when it switched (:mod:`.group_switch`)
#: goes as never delivered.  Answers how
#: many entries went back, or -1 when the node is alive again.
FORGET_RETURNING = (
    BODY_SIZE
    + REDELIVERIES_OF
    + FORGET_NODE_FUNCTION
    + """
local group, node = ARGV[1], ARGV[2]
local returned = KEYS[4]
if redis.call('EXISTS', KEYS[6]) == 1 then return -1 end
"""
    + UNCOUNT
    + _RETURNING
    + """
local moved = 0
local deciding = redis.call('GET', KEYS[7]) == node
if deciding then moved = moved + return_all(KEYS[5], node) end
moved = moved + sweep(returned, node)
-- what the node's switching read left pending for the decider (group_switch)
local above = nil
if redis.call('HEXISTS', KEYS[2], 'r:' .. node) == 1 then
  above = redis.call('HGET', KEYS[2], 'gs')
end
for i = 8, #KEYS do
  moved = moved + sweep(KEYS[i], node, KEYS[i] == ARGV[3] and above or nil)
end
if not deciding then moved = moved + return_all(KEYS[5], node) end
forget_node(KEYS[1], KEYS[2], KEYS[3], node)
if deciding then redis.call('DEL', KEYS[7]) end
return moved
"""
)


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
        "EVAL",
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
    returned: int = await engine.client.eval(
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
