-- KEYS: this node's liveness key. ARGV: the node's epoch, milliseconds.
-- Renews the key only while it holds that epoch; answers what it held.
local held = redis.call('GET', KEYS[1])
if held == ARGV[1] then redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2]) end
return held
