-- KEYS: registry, mode hash. ARGV: field.
if redis.call('HDEL', KEYS[1], ARGV[1]) == 1 then
  redis.call('HINCRBY', KEYS[2], 'v', 1)
end
return 0
