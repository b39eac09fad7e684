-- Lua: forget_node(registry, mode, groups, node) forgets a node's
-- consumers and the groups its consumers owned, bumping the registry's
-- version if it had any, and its plain reading (group_switch.py);
-- returns how many consumers went.
local function forget_node(registry, mode, groups, node)
  local prefix = node .. '/'
  local gone = 0
  for _, field in ipairs(redis.call('HKEYS', registry)) do
    if string.sub(field, 1, #prefix) == prefix then
      redis.call('HDEL', registry, field)
      gone = gone + 1
    end
  end
  local owners = redis.call('HGETALL', groups)
  for i = 1, #owners, 2 do
    if string.sub(owners[i + 1], 1, #prefix) == prefix then
      redis.call('HDEL', groups, owners[i])
    end
  end
  if gone > 0 then redis.call('HINCRBY', mode, 'v', 1) end
  redis.call('HDEL', mode, 'r:' .. node)
  return gone
end
