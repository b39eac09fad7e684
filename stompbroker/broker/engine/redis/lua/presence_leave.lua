-- KEYS: the destination's hash, the channel. ARGV: the field, the entry.
if redis.call('HDEL', KEYS[1], ARGV[1]) == 1 then
  redis.call('PUBLISH', KEYS[2], 'l' .. ARGV[2])
  return 1
end
return 0
