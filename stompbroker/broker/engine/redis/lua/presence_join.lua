-- KEYS: the destination's hash, the channel. ARGV: the field, the entry.
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('PUBLISH', KEYS[2], 'j' .. ARGV[2])
return 1
