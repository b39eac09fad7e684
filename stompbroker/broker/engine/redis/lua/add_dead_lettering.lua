-- KEYS: the stream, the dead-letter queue's stream, its byte counter
-- (shared_bytes.py). ARGV: the limit, the entry's payload, the
-- dead-letter queue, a fresh message-id, the reason. Moves the oldest entries
-- to the dead-letter stream, each behind its marking
-- (stompbroker.broker.engine.redis.codec.DEAD_LETTER, then the JSON
-- of the queue, a message-id and the reason, then a newline), counting its
-- body in the dead-letter stream's byte count if it has one, until adding one
-- keeps the stream within the limit; adds it; returns how many it moved.
--- @include "body_size"

local over = redis.call('XLEN', KEYS[1]) - tonumber(ARGV[1]) + 1
local moved = 0
local counted = redis.call('EXISTS', KEYS[3]) == 1
if over > 0 then
  local heads = redis.call('XRANGE', KEYS[1], '-', '+', 'COUNT', over)
  for _, entry in ipairs(heads) do
    local fields = entry[2]
    for i = 1, #fields, 2 do
      if fields[i] == 'm' then
        local id = moved == 0 and ARGV[4] or ARGV[4] .. '-' .. moved
        local marking = 'D' .. cjson.encode({ARGV[3], id, ARGV[5]}) .. '\n'
        redis.call('XADD', KEYS[2], '*', 'm', marking .. fields[i + 1])
        if counted then redis.call('INCRBY', KEYS[3], body_size(fields[i + 1])) end
      end
    end
    redis.call('XDEL', KEYS[1], entry[1])
    moved = moved + 1
  end
end
redis.call('XADD', KEYS[1], '*', 'm', ARGV[2])
return moved
