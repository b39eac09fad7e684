-- Delete a queue's streams: KEYS[1] its consumer registry, then each of its
-- streams (the queue's and its lanes') followed by its byte counter. Returns
-- -1 (and deletes nothing) when a consumer registered meanwhile, else how
-- many entries the streams held.
if redis.call('HLEN', KEYS[1]) > 0 then return -1 end
local held = 0
for i = 2, #KEYS, 2 do
  if redis.call('EXISTS', KEYS[i]) == 1 then
    held = held + redis.call('XLEN', KEYS[i])
  end
  redis.call('DEL', KEYS[i], KEYS[i + 1])
end
return held
