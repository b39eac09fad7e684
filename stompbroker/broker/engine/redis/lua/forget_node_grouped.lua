-- KEYS: registry, mode hash, groups hash, the queue's returned stream, the
-- dead node's own stream of it, its liveness key, the decider's lease, then
-- the queue's stream and lanes. ARGV: group, the dead node, the queue's
-- stream. A grouped queue's dead node, at once and only while its liveness
-- key is gone: what it held goes to the tail of the returned stream in the
-- order it got it (its own stream first if it was the decider, which never
-- moves entries to itself, so that its stream holds the older ones; else
-- last), with how often each was delivered, and its consumers and groups are
-- forgotten (as consumer_registry.FORGET_NODE); what it left
-- pending above the switch point when it switched (group_switch.py) goes
-- as never delivered. Answers how many entries went back, or -1 when the node
-- is alive again.
--- @include "body_size"
--- @include "redeliveries_of"
--- @include "forget_node"

local group, node = ARGV[1], ARGV[2]
local returned = KEYS[4]
if redis.call('EXISTS', KEYS[6]) == 1 then return -1 end
--- @include "uncount"
--- @include "returning"

local moved = 0
local deciding = redis.call('GET', KEYS[7]) == node
if deciding then moved = moved + return_all(KEYS[5], node) end
moved = moved + sweep(returned, node)
-- what the node's switching read left pending for the decider (group_switch)
local above = nil
if redis.call('HEXISTS', KEYS[2], 'r:' .. node) == 1 then
  above = redis.call('HGET', KEYS[2], 'gs')
end
for i = 8, #KEYS do
  moved = moved + sweep(KEYS[i], node, KEYS[i] == ARGV[3] and above or nil)
end
if not deciding then moved = moved + return_all(KEYS[5], node) end
forget_node(KEYS[1], KEYS[2], KEYS[3], node)
if deciding then redis.call('DEL', KEYS[7]) end
return moved
