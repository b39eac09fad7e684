-- KEYS[1] the lease. ARGV: this node, the lease's ms. Returns 1 when this
-- node holds the lease (takes or renews it), else 0.
local holder = redis.call('GET', KEYS[1])
if holder and holder ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return 1
