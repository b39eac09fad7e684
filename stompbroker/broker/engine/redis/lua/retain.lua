-- KEYS: the hash, the channel. ARGV: the topic's field, the message.
local seq = redis.call('HINCRBY', KEYS[1], '#seq', 1)
redis.call('HSET', KEYS[1], ARGV[1], seq .. '\n' .. ARGV[2])
redis.call('PUBLISH', KEYS[2], 's' .. ARGV[2])
return seq
