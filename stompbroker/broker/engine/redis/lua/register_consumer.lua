-- KEYS: registry, mode hash, then the queue's lanes (its stream among them).
-- ARGV: field, node, selector ('' for none), priority, exclusive (0/1),
-- single-active ('' absent, 0, 1), window, the liveness keys' prefix. A
-- registration that finds no live node's consumer declares the queue
-- single-active with x-single-active-consumer:true; without it, it
-- declares it not single-active only if the queue holds nothing (a queue that
-- lives on keeps its declaration, as on one node).
local live = false
for _, field in ipairs(redis.call('HKEYS', KEYS[1])) do
  local node = string.match(field, '^(.*)/[^/]*$')
  if node == ARGV[2] or redis.call('EXISTS', ARGV[8] .. node) == 1 then
    live = true
    break
  end
end
if not live then
  if ARGV[6] == '1' then
    redis.call('HSET', KEYS[2], 'sa', '1')
  else
    local empty = true
    for i = 3, #KEYS do
      if redis.call('XLEN', KEYS[i]) > 0 then
        empty = false
        break
      end
    end
    if empty then redis.call('HSET', KEYS[2], 'sa', '0') end
  end
end
local order = redis.call('HINCRBY', KEYS[2], 's', 1)
local selector = ARGV[3] ~= '' and ARGV[3] or cjson.null
redis.call('HSET', KEYS[1], ARGV[1], cjson.encode(
  {ARGV[2], selector, tonumber(ARGV[4]), tonumber(ARGV[5]), order, tonumber(ARGV[7])}))
redis.call('HINCRBY', KEYS[2], 'v', 1)
return order
