-- KEYS: registry, mode hash, the queue's returned stream, this node's own
-- stream of it, the decider's lease, this node's liveness key. ARGV: group,
-- this node, whether it leaves the queue (0/1), the node's epoch (as
-- queue_settling.GIVE_BACK's), k, k registry fields of its
-- consumers that leave, then per message: the stream of its entry ('' none),
-- the entry id, the payload, whether the node keeps a redelivery record of it
-- (0/1). A message whose entry another node holds now (after a lapse of this
-- one) is left to it. A grouped queue's give-back, atomic so that no decision
-- comes between a consumer's leaving and its messages' coming back: each
-- message goes to the tail of the returned stream (its entry ended, counted
-- out of its stream's bytes); then, leaving, everything the node's own stream
-- still holds (as RETURN_NODE) and the lease; else what the own
-- stream holds unread for the consumers that leave (field o); then the
-- consumers are unregistered. Answers the ids of the entries left to other
-- nodes.
--- @include "body_size"
--- @include "redeliveries_of"

local group, me = ARGV[1], ARGV[2]
local leaving = ARGV[3] == '1'
local checked = redis.call('GET', KEYS[6]) ~= ARGV[4]
local k = tonumber(ARGV[5])
local returned = KEYS[3]
--- @include "uncount"
--- @include "last_delivered"
--- @include "returning"

local foreign = {}
local i = 6 + k
while i <= #ARGV do
  local source, id, payload = ARGV[i], ARGV[i + 1], ARGV[i + 2]
  local row = checked and id ~= '' and redis.pcall('XPENDING', source, group, id, id, 1)
  if type(row) == 'table' and row[1] and row[1][2] ~= me then
    foreign[#foreign + 1] = id
  else
    add(payload, nil)
    if id ~= '' then
      redis.call('XACK', source, group, id)
      redis.call('XDEL', source, id)
      uncount(source .. ':bytes', body_size(payload))
      if ARGV[i + 3] == '1' then redis.call('HDEL', source .. ':redeliveries:' .. me, id) end
    end
  end
  i = i + 4
end
if leaving then
  return_all(KEYS[4], me)
  if redis.call('GET', KEYS[5]) == me then redis.call('DEL', KEYS[5]) end
elseif k > 0 and redis.call('EXISTS', KEYS[4]) == 1 then
  local leavers = {}
  for f = 6, 5 + k do leavers[ARGV[f]] = true end
  local last = last_delivered(KEYS[4], group)
  for _, entry in ipairs(redis.call('XRANGE', KEYS[4], '(' .. last, '+')) do
    local payload, owner = nil, nil
    for f = 1, #entry[2], 2 do
      if entry[2][f] == 'm' then payload = entry[2][f + 1] end
      if entry[2][f] == 'o' then owner = entry[2][f + 1] end
    end
    if payload and owner and leavers[owner] then
      add(payload, nil)
      redis.call('XDEL', KEYS[4], entry[1])
    end
  end
end
local gone = 0
for f = 6, 5 + k do gone = gone + redis.call('HDEL', KEYS[1], ARGV[f]) end
if gone > 0 then redis.call('HINCRBY', KEYS[2], 'v', 1) end
return foreign
