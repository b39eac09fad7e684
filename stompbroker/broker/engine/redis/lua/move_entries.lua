-- Move chosen entries: KEYS[1] the stream, KEYS[2] its byte counter; ARGV:
-- group, the number of dead nodes and their names, then per entry its id, the
-- target stream ('' for a topic: the node publishes it), the target's byte
-- counter and whether a byte limit applies to it ('1': the counter is made if
-- need be, as shared_bytes.ADD_SIZED makes it; else it is kept only
-- if it exists), its mode hash and the fields to set there ('p' for a lane,
-- 'g' for a grouped message, with its switch point: group_switch.py),
-- and the new message. Returns the ids moved.
--- @include "free"
--- @include "mark_grouped"
--- @include "body_size"
--- @include "uncount"

local dead = {}
local ndead = tonumber(ARGV[2])
for i = 3, 2 + ndead do dead[ARGV[i]] = true end
local done = {}
local gone = 0
for i = 3 + ndead, #ARGV, 7 do
  local id, target, counter, sized, mode, marks, payload =
    ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3], ARGV[i + 4], ARGV[i + 5], ARGV[i + 6]
  if #redis.call('XRANGE', KEYS[1], id, id) > 0 then
    local ok, pending = free(KEYS[1], ARGV[1], id, dead)
    if ok then
      local size = body_size(payload)
      if target ~= '' then
        for mark in string.gmatch(marks, '.') do
          if mark == 'g' then
            -- the queue's stream: its mode hash's name less ':mode' (keys.mode_key)
            mark_grouped(mode, string.sub(mode, 1, #mode - 5))
          else
            redis.call('HSET', mode, mark, '1')
          end
        end
        if sized == '1' or redis.call('EXISTS', counter) == 1 then
          if redis.call('XLEN', target) == 0 then redis.call('SET', counter, 0) end
          redis.call('INCRBY', counter, size)
        end
        redis.call('XADD', target, '*', 'm', payload)
      end
      if pending then redis.call('XACK', KEYS[1], ARGV[1], id) end
      redis.call('XDEL', KEYS[1], id)
      gone = gone + size
      done[#done + 1] = id
    end
  end
end
uncount(KEYS[2], gone)
return done
