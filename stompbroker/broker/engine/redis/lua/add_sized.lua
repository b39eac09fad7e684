-- KEYS: the stream, its counter, its recount mark, the dead-letter queue's
-- stream (or the stream itself when there is none), the dead-letter stream's
-- counter. ARGV: the most bytes, the most entries (-1: no limit), the
-- overflow (or keep: add and count, neither refuse nor push out), the
-- entry's payload, its body size, the dead-letter queue, a fresh message-id,
-- the reason. Returns {1, entries moved to the dead-letter stream} once
-- added, or {0, 'max-length-bytes'} / {0, 'max-length'} when
-- reject-publish refuses.
--- @include "body_size"

local stream, counter = KEYS[1], KEYS[2]
local max_bytes, max_length = tonumber(ARGV[1]), tonumber(ARGV[2])
local overflow, payload, size = ARGV[3], ARGV[4], tonumber(ARGV[5])
local length = redis.call('XLEN', stream)
local bytes = 0
if length > 0 then
  bytes = tonumber(redis.call('GET', counter) or '0') or 0
  if bytes < 0 then bytes = 0 end
end
local function over(entries, total)
  if max_length >= 0 and entries > max_length then return 'max-length' end
  if total > max_bytes then return 'max-length-bytes' end
  return nil
end
if length > 0 and over(length + 1, bytes + size)
    and redis.call('SET', KEYS[3], '1', 'PX', 1000, 'NX') then
  bytes = 0
  local from = '-'
  while true do
    local page = redis.call('XRANGE', stream, from, '+', 'COUNT', 1000)
    for _, entry in ipairs(page) do
      bytes = bytes + entry_size(entry[2])
      from = '(' .. entry[1]
    end
    if #page < 1000 then break end
  end
end
if overflow == 'reject-publish' then
  local limit = over(length + 1, bytes + size)
  if limit then
    redis.call('SET', counter, bytes)
    return {0, limit}
  end
end
redis.call('XADD', stream, '*', 'm', payload)
length, bytes = length + 1, bytes + size
local moved = 0
while overflow ~= 'keep' and length > 0 and over(length, bytes) do
  local head = redis.call('XRANGE', stream, '-', '+', 'COUNT', 1)[1]
  if head == nil then break end
  local gone = entry_size(head[2])
  if overflow == 'dead-letter' and KEYS[4] ~= stream then
    for i = 1, #head[2], 2 do
      if head[2][i] == 'm' then
        local id = moved == 0 and ARGV[7] or ARGV[7] .. '-' .. moved
        local marking = 'D' .. cjson.encode({ARGV[6], id, ARGV[8]}) .. '\n'
        redis.call('XADD', KEYS[4], '*', 'm', marking .. head[2][i + 1])
        if redis.call('EXISTS', KEYS[5]) == 1 then redis.call('INCRBY', KEYS[5], gone) end
      end
    end
    moved = moved + 1
  end
  redis.call('XDEL', stream, head[1])
  length, bytes = length - 1, bytes - gone
end
redis.call('SET', counter, bytes)
return {1, moved}
