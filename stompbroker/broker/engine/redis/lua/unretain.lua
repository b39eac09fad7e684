-- KEYS: the hash, the channel. ARGV: the topic's field, the message.
redis.call('HDEL', KEYS[1], ARGV[1])
redis.call('PUBLISH', KEYS[2], 'r' .. ARGV[2])
return 1
