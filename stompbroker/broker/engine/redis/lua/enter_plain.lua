-- KEYS: the queue's mode hash. ARGV: this node's field (r:NODE), a token
-- (r and a number) new for each plain reading of the queue by this node.
-- The field says that the node reads the plain way, unless it says l
-- (left for the decider); answers the queue's modes (p, v, g).
if redis.call('HGET', KEYS[1], ARGV[1]) ~= 'l' then
  redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
end
return redis.call('HMGET', KEYS[1], 'p', 'v', 'g')
