-- KEYS: the set of names. ARGV: the queue's destination, the notices'
-- channel. Adds the name; publishes it when the set did not hold it.
if redis.call('SADD', KEYS[1], ARGV[1]) == 1 then
  redis.call('PUBLISH', ARGV[2], ARGV[1])
end
return 0
