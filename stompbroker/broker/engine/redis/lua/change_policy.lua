-- KEYS: the hash. ARGV: the channel, the name, the field's value, the notice.
redis.call('HSET', KEYS[1], ARGV[2], ARGV[3])
redis.call('PUBLISH', ARGV[1], ARGV[4])
