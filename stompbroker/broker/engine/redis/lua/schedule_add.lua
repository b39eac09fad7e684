-- KEYS: the due set, the jobs hash, the due channel. ARGV: job id, delay ms,
-- state+message.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('HSET', KEYS[2], ARGV[1], ARGV[3])
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[1])
redis.call('PUBLISH', KEYS[3], ARGV[2])
return now
