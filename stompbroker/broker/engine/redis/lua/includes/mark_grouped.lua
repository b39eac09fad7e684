-- Lua: mark_grouped(mode, stream) sets field g of a queue's mode hash
-- and, the first time, gs, the switch point (group_switch.py): the
-- id of the newest entry of the queue's stream.
local function mark_grouped(mode, stream)
  if redis.call('HSETNX', mode, 'g', '1') == 1 then
    local newest = redis.call('XREVRANGE', stream, '+', '-', 'COUNT', 1)[1]
    redis.call('HSET', mode, 'gs', newest and newest[1] or '0-0')
  end
end
