-- KEYS: registry, groups hash, mode hash. ARGV: group, node-stream prefix
-- (keys.node_stream_prefix), the returned stream, this node, how
-- many entries this node's consumers have room for, then per entry: source
-- stream, entry id, payload, message group ('' none), closes group (0/1), the
-- active consumer's field ('' none), its original entry id ('' for the entry
-- id: field i of an entry given back or handed back, ORIGINAL),
-- n, m, then n candidate nodes each with the windows of its consumers there,
-- then m candidate consumers, best first, each as field, node, priority,
-- order. Answers per entry the node it went to ('' when none may take it; the
-- returned stream's name when it went there) and the consumer that owns its
-- group there ('' none). An entry moved to a node's own stream keeps its
-- original id in field i, so that a browse or a move shows it in the
-- queue's order among the lane's entries of its priority. A message goes to
-- the consumer one node's round-robin picks, a grouped one to its group's
-- owner (or picks it). A grouped entry of the queue's stream or lanes, while
-- the returned stream (keys.returned_stream) holds entries nobody
-- has read, goes to the returned stream's tail instead, behind them: so what
-- an owner gave back is decided before any newer message of its groups (one
-- XLEN per batch with a grouped entry tells while the returned stream is
-- empty). An entry moved out of a stream with a byte counter is counted out
-- of it (shared_bytes.py).
--- @include "body_size"

local group, prefix, returned, me = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local room_here = tonumber(ARGV[5])
--- @include "uncount"
--- @include "last_delivered"

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
    uncount(source .. ':bytes', body_size(payload))
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
      uncount(source .. ':bytes', body_size(payload))
    end
    answers[#answers + 1] = target or ''
    answers[#answers + 1] = owner or ''
  end
  i = consumers + 4 * m
end
return answers
