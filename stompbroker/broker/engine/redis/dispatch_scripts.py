"""
The scripts that a shared queue's deciding node (:mod:`.dispatch`) runs in
Redis, each one round trip and atomic: moving the entries it read to the nodes
of the consumers that should get them, handing a node's own stream back, and
the decider's lease.
"""

from __future__ import annotations

from stompbroker.broker.engine.redis.shared_bytes import BODY_SIZE

__all__ = [
    "LAST_DELIVERED",
    "LEAD",
    "MOVE",
    "REDELIVERIES_OF",
    "RESIGN",
    "RETURN_NODE",
    "UNCOUNT",
]

#: Lua: takes an entry's bytes off its stream's byte counter, if the stream
#: has one (:func:`~.keys.byte_counter`).
UNCOUNT = """
local function uncount(source, payload)
  local counter = source .. ':bytes'
  if redis.call('EXISTS', counter) == 1 then
    if redis.call('DECRBY', counter, body_size(payload)) < 0 then redis.call('SET', counter, 0) end
  end
end
"""

#: Lua: ``last_delivered(stream, group)``, the id of the entry of ``stream``
#: its group read last ('0-0' if none, or if the stream or group is missing).
LAST_DELIVERED = """
local function last_delivered(stream, group)
  local last = '0-0'
  local ok, groups = pcall(redis.call, 'XINFO', 'GROUPS', stream)
  if ok then
    for _, info in ipairs(groups) do
      local name, delivered = nil, nil
      for f = 1, #info, 2 do
        if info[f] == 'name' then name = info[f + 1] end
        if info[f] == 'last-delivered-id' then delivered = info[f + 1] end
      end
      if name == group then last = delivered end
    end
  end
  return last
end
"""

#: KEYS: registry, groups hash, mode hash.  ARGV: group, node-stream prefix
#: (:func:`~.keys.node_stream_prefix`), the returned stream, this node, how
#: many entries this node's consumers have room for, then per entry: source
#: stream, entry id, payload, message group ('' none), closes group (0/1), the
#: active consumer's field ('' none), its original entry id ('' for the entry
#: id: field ``i`` of an entry given back or handed back, :data:`ORIGINAL`), n,
#: m, then n candidate nodes each with the windows of its consumers there, then m
#: candidate consumers, best first, each as field, node, priority, order.
#: Answers per entry the node it went to ('' when none may take it; the
#: returned stream's name when it went there) and the consumer that owns its
#: group there ('' none).  An entry moved to a node's own stream keeps its
#: original id in field ``i``, so that a browse or a move shows it in the
#: queue's order among the lane's entries of its priority.  A message goes to
#: the consumer one node's round-robin picks, a grouped one to its group's owner (or picks it).  A
#: grouped entry of the queue's stream or lanes, while the returned stream
#: (:func:`~.keys.returned_stream`) holds entries nobody has read, goes to the
#: returned stream's tail instead, behind them: so what an owner gave back is
#: decided before any newer message of its groups (one ``XLEN`` per batch
#: with a grouped entry tells while the returned stream is empty).  An entry moved out of a
#: stream with a byte counter is counted out of it (:mod:`.shared_bytes`).
MOVE = (
    BODY_SIZE
    + """
local group, prefix, returned, me = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local room_here = tonumber(ARGV[5])
"""
    + UNCOUNT
    + LAST_DELIVERED
    + """
local waiting = nil
-- Whether the returned stream holds entries the decider has not read yet.
local function returned_waiting()
  if waiting == nil then
    waiting = false
    if redis.call('XLEN', returned) > 0 then
      local last = last_delivered(returned, group)
      waiting = #redis.call('XRANGE', returned, '(' .. last, '+', 'COUNT', 1) > 0
    end
  end
  return waiting
end
local fields = {}
for _, field in ipairs(redis.call('HKEYS', KEYS[1])) do fields[field] = true end
local kept = 0
local function room(node, window)
  if node == me then return kept < room_here end
  if not window then return false end
  local stream = prefix .. node
  return redis.call('XLEN', stream) < window
end
-- The consumer for a message, or a group's new owner, as one node's
-- round-robin picks it: in the highest priority that has a consumer with room,
-- the next after the last one picked there (field t:PRIORITY of the mode
-- hash), wrapping; the next in turn of the highest priority when none has room.
local function pick(base, m, windows)
  local fallback = nil
  local c = 1
  while c <= m do
    local priority = ARGV[base + 4 * c - 2]
    local d = c
    while d < m and ARGV[base + 4 * d + 2] == priority do d = d + 1 end
    local last = tonumber(redis.call('HGET', KEYS[3], 't:' .. priority)) or -1
    local after, any, first_after, first_any = nil, nil, nil, nil
    for k = c, d do
      local field, node = ARGV[base + 4 * k - 4], ARGV[base + 4 * k - 3]
      local order = tonumber(ARGV[base + 4 * k - 1])
      if fields[field] then
        if order > last then first_after = first_after or k end
        first_any = first_any or k
        if room(node, windows[node]) then
          if order > last then after = after or k end
          any = any or k
        end
      end
    end
    local chosen = after or any
    fallback = fallback or first_after or first_any
    if chosen then return chosen end
    c = d + 1
  end
  return fallback
end
local answers = {}
local i = 6
while i <= #ARGV do
  local source, id, payload = ARGV[i], ARGV[i + 1], ARGV[i + 2]
  local message_group, closes, active = ARGV[i + 3], ARGV[i + 4], ARGV[i + 5]
  local original = ARGV[i + 6]
  if original == '' then original = id end
  local n, m = tonumber(ARGV[i + 7]), tonumber(ARGV[i + 8])
  local windows, target, owner = {}, nil, nil
  local nodes = i + 9
  local consumers = nodes + 2 * n
  for c = 0, n - 1 do windows[ARGV[nodes + 2 * c]] = tonumber(ARGV[nodes + 2 * c + 1]) end
  if message_group ~= '' and source ~= returned and returned_waiting() then
    -- Behind what an owner gave back, which may be of this group.
    redis.call('XADD', returned, '*', 'm', payload)
    redis.call('XACK', source, group, id)
    redis.call('XDEL', source, id)
    uncount(source, payload)
    answers[#answers + 1] = returned
    answers[#answers + 1] = ''
  else
    local chosen = false
    if message_group ~= '' then
      owner = redis.call('HGET', KEYS[2], message_group)
      if owner and fields[owner] and (active == '' or owner == active) then
        target = string.match(owner, '^(.*)/[^/]*$')
      else
        owner = nil
        chosen = true
      end
    else
      chosen = true
    end
    if chosen then
      local k = pick(consumers, m, windows)
      if k then
        target = ARGV[consumers + 4 * k - 3]
        redis.call('HSET', KEYS[3], 't:' .. ARGV[consumers + 4 * k - 2],
          ARGV[consumers + 4 * k - 1])
        if message_group ~= '' then
          owner = ARGV[consumers + 4 * k - 4]
          redis.call('HSET', KEYS[2], message_group, owner)
        end
      end
    end
    if owner and closes == '1' then redis.call('HDEL', KEYS[2], message_group) end
    if target == me then kept = kept + 1 end
    if target and target ~= me then
      local stream = prefix .. target
      if redis.call('EXISTS', stream) == 0 then
        redis.call('XGROUP', 'CREATE', stream, group, '0', 'MKSTREAM')
      end
      if owner then
        redis.call('XADD', stream, '*', 'm', payload, 'o', owner, 'i', original)
      else
        redis.call('XADD', stream, '*', 'm', payload, 'i', original)
      end
      redis.call('XACK', source, group, id)
      redis.call('XDEL', source, id)
      uncount(source, payload)
    end
    answers[#answers + 1] = target or ''
    answers[#answers + 1] = owner or ''
  end
  i = consumers + 4 * m
end
return answers
"""
)

#: Lua: the redelivery count a queue entry's payload carries, in either form
#: (:func:`~.codec.encode_entry`'s binary one: a big-endian count after the
#: marker, the flags and the priority; or the JSON one: the sixth field of its
#: first line); ``nil`` for anything else.
REDELIVERIES_OF = """
local function redeliveries_of(payload)
  local kind = string.sub(payload, 1, 1)
  if kind == 'M' then
    local a, b, c, d = string.byte(payload, 4, 7)
    if not d then return nil end
    return ((a * 256 + b) * 256 + c) * 256 + d
  elseif kind == '[' then
    local meta = cjson.decode(string.sub(payload, 1, string.find(payload, '\\n', 1, true) - 1))
    return meta[6]
  end
  return nil
end
"""

#: KEYS: a node's own stream of a queue, the queue's stream, its byte counter,
#: and (optional) the node's redelivery records of its own stream
#: (:mod:`.redelivery_records`).  ARGV: group, then (optional) the queue's ten
#: lanes for priorities 0 to 9 and their ten byte counters (:mod:`.lanes`).
#: Hands everything the node's stream holds back to the lane of its priority
#: (the queue's stream without the lanes, or for an entry in the JSON form), in
#: order, a delivered entry with its delivery count (field ``r``), or one more
#: than its record when that says more, and its original id (field ``i``:
#: :data:`MOVE`), counting it in if the lane's counter exists (:mod:`.shared_bytes`).
RETURN_NODE = (
    BODY_SIZE
    + REDELIVERIES_OF
    + """
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
local counted = {}
local function count_in(counter, payload)
  if counted[counter] == nil then counted[counter] = redis.call('EXISTS', counter) == 1 end
  if counted[counter] then redis.call('INCRBY', counter, body_size(payload)) end
end
-- the lane of the entry's priority, and its byte counter (binary entries say it)
local function target_of(payload)
  if #ARGV < 21 or string.sub(payload, 1, 1) ~= 'M' then return KEYS[2], KEYS[3] end
  local p = string.byte(payload, 3)
  if not p or p > 9 then return KEYS[2], KEYS[3] end
  return ARGV[2 + p], ARGV[12 + p]
end
local delivered = {}
local ok, rows = pcall(redis.call, 'XPENDING', KEYS[1], ARGV[1], '-', '+', 1000000)
if ok then
  for _, row in ipairs(rows) do delivered[row[1]] = row[4] end
end
local recorded = {}
if KEYS[4] then
  local flat = redis.call('HGETALL', KEYS[4])
  for f = 1, #flat, 2 do recorded[flat[f]] = tonumber(flat[f + 1]) end
  redis.call('DEL', KEYS[4])
end
local entries = redis.call('XRANGE', KEYS[1], '-', '+')
for _, entry in ipairs(entries) do
  local fields = entry[2]
  local payload, original = nil, entry[1]
  for f = 1, #fields, 2 do
    if fields[f] == 'm' then payload = fields[f + 1] end
    if fields[f] == 'i' then original = fields[f + 1] end
  end
  if payload then
    local target, counter = target_of(payload)
    count_in(counter, payload)
    local times = delivered[entry[1]]
    local record = recorded[entry[1]]
    local own = record and redeliveries_of(payload)
    if own then
      -- the record is the whole count; r is what adds to the payload's own
      times = math.max(times or 0, record + 1 - own)
    end
    if times then
      redis.call('XADD', target, '*', 'm', payload, 'r', times, 'i', original)
    else
      redis.call('XADD', target, '*', 'm', payload, 'i', original)
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
