-- KEYS: the due set, the jobs hash. ARGV: the due channel, job id, delay ms,
-- state+message.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('HSET', KEYS[2], ARGV[2], ARGV[4])
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[3]), ARGV[2])
redis.call('PUBLISH', ARGV[1], ARGV[3])
return now
