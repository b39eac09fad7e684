-- uncount(counter, gone): takes gone bytes off a byte counter
-- (keys.byte_counter), if it exists (a stream without a byte limit has none),
-- never below 0.
local function uncount(counter, gone)
  if gone > 0 and redis.call('EXISTS', counter) == 1 then
    if redis.call('DECRBY', counter, gone) < 0 then redis.call('SET', counter, 0) end
  end
end
