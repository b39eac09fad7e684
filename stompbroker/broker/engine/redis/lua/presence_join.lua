-- KEYS: the destination's hash. ARGV: the channel, the field, the entry.
redis.call('HSET', KEYS[1], ARGV[2], ARGV[3])
redis.call('PUBLISH', ARGV[1], 'j' .. ARGV[3])
return 1
