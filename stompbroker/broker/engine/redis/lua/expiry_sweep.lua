-- KEYS: the marks' hash, the tags' hash, then per queue its registry, its
-- mode hash and its ten streams (the queue's and its lanes'). ARGV: the claim
-- (ms), then per queue its name, its expires (ms) and its policy. Returns
-- the queues unused for longer than their expires, each claimed.
local used, tags = KEYS[1], KEYS[2]
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
local expired = {}
local count = (#KEYS - 2) / 12
for c = 0, count - 1 do
  local k = 2 + c * 12
  local queue, expires, policy = ARGV[2 + c * 3], tonumber(ARGV[3 + c * 3]), ARGV[4 + c * 3]
  local exists = false
  for i = k + 3, k + 12 do
    if redis.call('EXISTS', KEYS[i]) == 1 then exists = true; break end
  end
  if not exists then
    redis.call('HDEL', used, queue)
    redis.call('HDEL', tags, queue)
  else
    local version = redis.call('HGET', KEYS[k + 2], 'v') or ''
    local tag = policy .. ' ' .. ARGV[3 + c * 3] .. ' ' .. version
    local since = tonumber(redis.call('HGET', used, queue) or '')
    if since == nil or redis.call('HLEN', KEYS[k + 1]) > 0
        or redis.call('HGET', tags, queue) ~= tag then
      redis.call('HSET', used, queue, now)
      redis.call('HSET', tags, queue, tag)
    elseif now - since >= expires then
      redis.call('HSET', used, queue, now + tonumber(ARGV[1]))
      expired[#expired + 1] = queue
    end
  end
end
return expired
