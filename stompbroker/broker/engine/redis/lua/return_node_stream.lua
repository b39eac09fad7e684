-- KEYS: a node's own stream of a queue, the queue's stream, its byte counter,
-- and (optional) the node's redelivery records of its own stream
-- (redelivery_records.py). ARGV: group, then (optional) the queue's ten
-- lanes for priorities 0 to 9 and their ten byte counters (lanes.py).
-- Hands everything the node's stream holds back to the lane of its priority
-- (the queue's stream without the lanes, or for an entry in the JSON form),
-- in order, a delivered entry with its delivery count (field r), or one
-- more than its record when that says more, and its original id (field i:
-- MOVE), counting it in if the lane's counter exists
-- (shared_bytes.py).
--- @include "body_size"
--- @include "redeliveries_of"

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
