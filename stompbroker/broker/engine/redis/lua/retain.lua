-- KEYS: the hash. ARGV: the channel, the topic's field, the message.
local seq = redis.call('HINCRBY', KEYS[1], '#seq', 1)
redis.call('HSET', KEYS[1], ARGV[2], seq .. '\n' .. ARGV[3])
redis.call('PUBLISH', ARGV[1], 's' .. ARGV[3])
return seq
