-- KEYS: a queue's decider lease. ARGV: this node. Lets it go if this node
-- holds it.
if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('DEL', KEYS[1]) end
return 0
