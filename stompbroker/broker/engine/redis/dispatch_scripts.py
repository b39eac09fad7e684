"""
The scripts that a shared queue's deciding node (:mod:`.dispatch`) runs in
Redis, each one round trip and atomic: moving the entries it read to the nodes
of the consumers that should get them, handing a node's own stream back, and
the decider's lease.
"""

from __future__ import annotations

from stompbroker.broker.engine.redis.shared_bytes import BODY_SIZE

__all__ = ["LEAD", "MOVE", "RESIGN", "RETURN_NODE"]

#: KEYS: registry, groups hash, mode hash.  ARGV: group, node-stream prefix,
#: destination, this node, whether this node's consumers have room (0/1), then
#: per entry: source stream, entry id, payload, message group ('' none), closes
#: group (0/1), the active consumer's field ('' none), n, m, then n candidate
#: nodes each with the windows of its consumers there, then (for a grouped
#: entry) m candidate consumers, best first, each as field, node, priority, order.
#: Answers per entry the node it went to ('' when none may take it) and the
#: consumer that owns its group there ('' none).  An entry moved out of a
#: stream with a byte counter is counted out of it (:mod:`.shared_bytes`; the
#: counter is named from the node-stream prefix).
MOVE = (
    BODY_SIZE
    + """
local group, prefix, destination, me = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local room_here = ARGV[5] == '1'
local root = string.sub(prefix, 1, #prefix - 3)
local function uncount(source, payload)
  local counter = root .. 'qb:' .. string.sub(source, #root + 1)
  if redis.call('EXISTS', counter) == 1 then
    if redis.call('DECRBY', counter, body_size(payload)) < 0 then redis.call('SET', counter, 0) end
  end
end
local fields, registered = {}, {}
for _, field in ipairs(redis.call('HKEYS', KEYS[1])) do
  fields[field] = true
  registered[string.match(field, '^(.*)/[^/]*$')] = true
end
local function room(node, window)
  if node == me then return room_here end
  if not window then return false end
  local stream = prefix .. node .. ':' .. destination
  return redis.call('XLEN', stream) < window
end
-- A new owner for a group, as one node's round-robin picks it: in the highest
-- priority that has a consumer with room, the next after the last one picked
-- there (field t:PRIORITY of the mode hash), wrapping; the next in turn of the
-- highest priority when none has room.
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
  local n, m = tonumber(ARGV[i + 6]), tonumber(ARGV[i + 7])
  local windows, target, owner = {}, nil, nil
  local nodes = i + 8
  local consumers = nodes + 2 * n
  for c = 0, n - 1 do windows[ARGV[nodes + 2 * c]] = tonumber(ARGV[nodes + 2 * c + 1]) end
  if message_group ~= '' then
    owner = redis.call('HGET', KEYS[2], message_group)
    if owner and fields[owner] and (active == '' or owner == active) then
      target = string.match(owner, '^(.*)/[^/]*$')
    else
      owner = nil
      local k = pick(consumers, m, windows)
      if k then
        owner = ARGV[consumers + 4 * k - 4]
        target = ARGV[consumers + 4 * k - 3]
        redis.call('HSET', KEYS[3], 't:' .. ARGV[consumers + 4 * k - 2],
          ARGV[consumers + 4 * k - 1])
        redis.call('HSET', KEYS[2], message_group, owner)
      end
    end
    if owner and closes == '1' then redis.call('HDEL', KEYS[2], message_group) end
  else
    local first = nil
    for c = 0, n - 1 do
      local node = ARGV[nodes + 2 * c]
      if registered[node] then
        first = first or node
        if room(node, windows[node]) then target = node break end
      end
    end
    target = target or first
  end
  if target and target ~= me then
    local stream = prefix .. target .. ':' .. destination
    if redis.call('EXISTS', stream) == 0 then
      redis.call('XGROUP', 'CREATE', stream, group, '0', 'MKSTREAM')
    end
    if owner then
      redis.call('XADD', stream, '*', 'm', payload, 'o', owner)
    else
      redis.call('XADD', stream, '*', 'm', payload)
    end
    redis.call('XACK', source, group, id)
    redis.call('XDEL', source, id)
    uncount(source, payload)
  end
  answers[#answers + 1] = target or ''
  answers[#answers + 1] = owner or ''
  i = consumers + 4 * m
end
return answers
"""
)

#: KEYS: a node's own stream of a queue, the queue's stream, its byte counter,
#: and (optional) the node's redelivery records of its own stream
#: (:mod:`.redelivery_records`).  ARGV: group.  Hands everything the node's
#: stream holds back to the queue's stream, in order, a delivered entry with
#: its delivery count (field ``r``), or one more than its record when that says
#: more, counting it in if the counter exists (:mod:`.shared_bytes`).
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
local recorded = {}
if KEYS[4] then
  local flat = redis.call('HGETALL', KEYS[4])
  for f = 1, #flat, 2 do recorded[flat[f]] = tonumber(flat[f + 1]) end
  redis.call('DEL', KEYS[4])
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
    local record = recorded[entry[1]]
    if record and string.sub(payload, 1, 1) == '[' then
      -- the record is the whole count; r is what adds to the payload's own
      local meta = cjson.decode(string.sub(payload, 1, string.find(payload, '\\n', 1, true) - 1))
      times = math.max(times or 0, record + 1 - meta[6])
    end
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
