"""
The scripts that a shared queue's deciding node (:mod:`.dispatch`) runs in
Redis, each one round trip and atomic: moving the entries it read to the nodes
of the consumers that should get them, handing a node's own stream back, and
the decider's lease.
"""

from __future__ import annotations

from stompbroker.broker.engine.redis.consumer_registry import FORGET_NODE_FUNCTION
from stompbroker.broker.engine.redis.shared_bytes import BODY_SIZE

__all__ = [
    "FORGET_RETURNING",
    "LEAD",
    "MOVE",
    "REDELIVERIES_OF",
    "RESIGN",
    "RETURN_GROUPED",
    "RETURN_NODE",
]

#: Lua (after ``root``, the keys' prefix with its colon, is set): takes an
#: entry's bytes off its stream's byte counter, if the stream has one.
_UNCOUNT = """
local function uncount(source, payload)
  local counter = root .. 'qb:' .. string.sub(source, #root + 1)
  if redis.call('EXISTS', counter) == 1 then
    if redis.call('DECRBY', counter, body_size(payload)) < 0 then redis.call('SET', counter, 0) end
  end
end
"""

#: KEYS: registry, groups hash, mode hash.  ARGV: group, node-stream prefix,
#: destination, this node, how many entries this node's consumers have room
#: for, then per entry: source stream, entry id, payload, message group (''
#: none), closes group (0/1), the active consumer's field ('' none), its
#: original entry id ('' for the entry id: field ``i`` of an entry given back
#: or handed back, :data:`ORIGINAL`), n, m, then
#: n candidate nodes each with the windows of its consumers there, then m
#: candidate consumers, best first, each as field, node, priority, order.
#: Answers per entry the node it went to ('' when none may take it; the
#: returned stream's name when it went there) and the consumer that owns its
#: group there ('' none).  An entry moved to a node's own stream keeps its
#: original id in field ``i``, so that a browse or a move shows it in the
#: queue's order among the lane's entries of its priority.  A message goes to
#: the consumer one node's round-robin picks, a grouped one to its group's owner (or picks it).  A
#: grouped entry of the queue's stream or lanes, while the returned stream
#: (``PREFIX:qret:/queue/NAME``) holds entries nobody has read, goes to the
#: returned stream's tail instead, behind them: so what an owner gave back is
#: decided before any newer message of its groups (one ``XLEN`` per batch
#: with a grouped entry tells while the returned stream is empty).  An entry moved out of a
#: stream with a byte counter is counted out of it (:mod:`.shared_bytes`; the
#: counter is named from the node-stream prefix).
MOVE = (
    BODY_SIZE
    + """
local group, prefix, destination, me = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local room_here = tonumber(ARGV[5])
local root = string.sub(prefix, 1, #prefix - 3)
local returned = root .. 'qret:' .. destination
"""
    + _UNCOUNT
    + """
local waiting = nil
-- Whether the returned stream holds entries the decider has not read yet.
local function returned_waiting()
  if waiting == nil then
    waiting = false
    if redis.call('XLEN', returned) > 0 then
      local last = '0-0'
      local ok, groups = pcall(redis.call, 'XINFO', 'GROUPS', returned)
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
  local stream = prefix .. node .. ':' .. destination
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
      local stream = prefix .. target .. ':' .. destination
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


#: Lua (after ``root``, ``group`` and ``returned`` are set): what a node gives
#: back to a grouped queue goes to the tail of its returned stream, with how
#: often it was delivered (field ``r``) when known, or as the node's
#: redelivery record of it says (:mod:`.redelivery_records`, which goes);
#: ``return_all`` hands back everything a node's own stream holds, in order,
#: and deletes it; ``sweep`` hands back a dead node's pending entries of a stream.
_RETURNING = """
local function records_of(node, stream)
  local key = root .. 'qr:' .. node .. ':' .. stream
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
#: the keys' prefix with its colon, this node, whether it leaves the queue
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
local group, root, me = ARGV[1], ARGV[2], ARGV[3]
local leaving = ARGV[4] == '1'
local checked = redis.call('GET', KEYS[6]) ~= ARGV[5]
local k = tonumber(ARGV[6])
local returned = KEYS[3]
"""
    + _UNCOUNT
    + _RETURNING
    + """
local foreign = {}
local i = 7 + k
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
      if ARGV[i + 3] == '1' then redis.call('HDEL', root .. 'qr:' .. me .. ':' .. source, id) end
    end
  end
  i = i + 4
end
if leaving then
  return_all(KEYS[4], me)
  if redis.call('GET', KEYS[5]) == me then redis.call('DEL', KEYS[5]) end
elseif k > 0 and redis.call('EXISTS', KEYS[4]) == 1 then
  local leavers = {}
  for f = 7, 6 + k do leavers[ARGV[f]] = true end
  local last = '0-0'
  for _, info in ipairs(redis.call('XINFO', 'GROUPS', KEYS[4])) do
    local name, delivered = nil, nil
    for f = 1, #info, 2 do
      if info[f] == 'name' then name = info[f + 1] end
      if info[f] == 'last-delivered-id' then delivered = info[f + 1] end
    end
    if name == group then last = delivered end
  end
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
for f = 7, 6 + k do gone = gone + redis.call('HDEL', KEYS[1], ARGV[f]) end
if gone > 0 then redis.call('HINCRBY', KEYS[2], 'v', 1) end
return foreign
"""
)

#: KEYS: registry, mode hash, groups hash, the queue's returned stream, the
#: dead node's own stream of it, its liveness key, the decider's lease, then
#: the queue's stream and lanes.  ARGV: group, the keys' prefix with its colon,
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
local group, root, node = ARGV[1], ARGV[2], ARGV[3]
local returned = KEYS[4]
if redis.call('EXISTS', KEYS[6]) == 1 then return -1 end
"""
    + _UNCOUNT
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
  moved = moved + sweep(KEYS[i], node, KEYS[i] == ARGV[4] and above or nil)
end
if not deciding then moved = moved + return_all(KEYS[5], node) end
forget_node(KEYS[1], KEYS[2], KEYS[3], node)
if deciding then redis.call('DEL', KEYS[7]) end
return moved
"""
)
