-- KEYS: the hash. ARGV: the channel, the topic's field, the message.
redis.call('HDEL', KEYS[1], ARGV[2])
redis.call('PUBLISH', ARGV[1], 'r' .. ARGV[3])
return 1
