-- KEYS: a stream, this node's redelivery records of it (redelivery_records.py),
-- this node's liveness key, and, for a stream with a byte limit, its byte
-- counter (shared_bytes.py). ARGV: group, this node, 1 if some of the entries
-- have a record (else 0), the node's epoch when it settled them
-- (liveness.Liveness.epoch), then entry ids. Ends (XACK, XDEL) each entry
-- unless another consumer holds it. While the liveness key still holds that
-- epoch it has not expired since, so no node has claimed anything from this
-- one and all are ended at once (one GET per script). Otherwise one
-- XPENDING id id 1 per entry asks whom it is pending to (a seek in the group's
-- pending list; XCLAIM cannot ask it: it takes an entry from whoever holds
-- it); an entry pending to nobody (a copy Redis handed out again after a
-- roll-back, or one whose XDEL was lost) is ended too. With a byte counter,
-- the bodies' bytes come off it. Answers the ids left to the nodes that hold
-- them.
--- @include "body_size"
--- @include "uncount"
local stream, group, me = KEYS[1], ARGV[1], ARGV[2]
local ended, foreign = {}, {}
if redis.call('GET', KEYS[3]) == ARGV[4] then
  ended = {unpack(ARGV, 5)}
else
  for i = 5, #ARGV do
    local id = ARGV[i]
    local row = redis.pcall('XPENDING', stream, group, id, id, 1)
    if type(row) == 'table' and row[1] and row[1][2] ~= me then
      foreign[#foreign + 1] = id
    else
      ended[#ended + 1] = id
    end
  end
end
if #ended > 0 then
  redis.call('XACK', stream, group, unpack(ended))
  if KEYS[4] then
    local gone = 0
    for _, id in ipairs(ended) do
      local found = redis.call('XRANGE', stream, id, id)
      if #found > 0 then gone = gone + entry_size(found[1][2]) end
    end
    uncount(KEYS[4], gone)
  end
  redis.call('XDEL', stream, unpack(ended))
  if ARGV[3] == '1' then redis.call('HDEL', KEYS[2], unpack(ended)) end
end
return foreign
