-- KEYS: the hash, the channel. ARGV: the name, the field's value, the notice.
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('PUBLISH', KEYS[2], ARGV[3])
