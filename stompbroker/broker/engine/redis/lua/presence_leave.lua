-- KEYS: the destination's hash. ARGV: the channel, the field, the entry.
if redis.call('HDEL', KEYS[1], ARGV[2]) == 1 then
  redis.call('PUBLISH', ARGV[1], 'l' .. ARGV[3])
  return 1
end
return 0
