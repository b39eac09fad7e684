-- KEYS: the queue's mode hash. ARGV: this node's field, and l if it left
-- entries above the switch point pending, * for any plain reading of it,
-- else the token of its plain reading (ENTER_PLAIN). This node reads
-- the queue the plain way no more: its field says so (l), or goes if it
-- still holds that token (not a later reading's, nor l: left by an
-- earlier one, for the decider to take).
local held = redis.call('HGET', KEYS[1], ARGV[1])
if ARGV[2] == 'l' then
  redis.call('HSET', KEYS[1], ARGV[1], 'l')
elseif held == ARGV[2] or (ARGV[2] == '*' and held and held ~= 'l') then
  redis.call('HDEL', KEYS[1], ARGV[1])
end
return 0
