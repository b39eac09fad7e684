-- Finds a record, checks it, takes it. KEYS[1]: the set of hashes. ARGV: the
-- token's key, the login, the version, the hashes' prefix, the liveness keys'
-- prefix.
local nodes = redis.call('SMEMBERS', KEYS[1])
for _, node in ipairs(nodes) do
  local hash = ARGV[4] .. node
  local record = redis.call('HGET', hash, ARGV[1])
  if record then
    local decoded = cjson.decode(record)
    if decoded['login'] ~= ARGV[2] or decoded['version'] ~= ARGV[3] then
      return false
    end
    redis.call('HDEL', hash, ARGV[1])
    return {node, record, redis.call('EXISTS', ARGV[5] .. node)}
  elseif redis.call('EXISTS', hash) == 0 and redis.call('EXISTS', ARGV[5] .. node) == 0 then
    redis.call('SREM', KEYS[1], node)
  end
end
return false
