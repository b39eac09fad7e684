-- KEYS: a stream, the liveness key of the node whose entries are claimed, and
-- that node's redelivery records of the stream (redelivery_records.py).
-- ARGV: group, this node, then the entry ids. Claims them only while that key
-- is absent, in one step: a node that came back and announced itself again
-- (stompbroker.broker.engine.redis.liveness.Liveness.lapse) keeps
-- what its pending lists hold from then on. Answers the claimed entries, as
-- XCLAIM does, and the records of the ids asked for, in their order (0
-- for none), which it removes.
if redis.call('EXISTS', KEYS[2]) == 1 then return {{}, {}} end
local claimed = redis.call('XCLAIM', KEYS[1], ARGV[1], ARGV[2], 0, unpack(ARGV, 3))
local records = {}
if redis.call('EXISTS', KEYS[3]) == 1 then
  local found = redis.call('HMGET', KEYS[3], unpack(ARGV, 3))
  redis.call('HDEL', KEYS[3], unpack(ARGV, 3))
  for i = 1, #ARGV - 2 do records[i] = tonumber(found[i]) or 0 end
end
return {claimed, records}
