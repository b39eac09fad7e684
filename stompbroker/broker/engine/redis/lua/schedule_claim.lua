-- KEYS: the due set, the jobs hash, the flying set. ARGV: most jobs, lease
-- ms. Returns {now, next due or -1, job, fired, state+message, ...}; fired is
-- -1 for a job whose state could not be read (removed).
--- @include "schedule_state"

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local most, lease = tonumber(ARGV[1]), tonumber(ARGV[2])
local out = {now, -1}
local lost = redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', now, 'LIMIT', 0, most)
for _, member in ipairs(lost) do
  local fired, job = string.match(member, '^(%d+) (.*)$')
  local value = job and redis.call('HGET', KEYS[2], job)
  if not value then
    redis.call('ZREM', KEYS[3], member)
  else
    redis.call('ZADD', KEYS[3], now + lease, member)
    out[#out + 1] = job
    out[#out + 1] = fired
    out[#out + 1] = value
  end
end
local jobs = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'LIMIT', 0, most)
for _, job in ipairs(jobs) do
  local value = redis.call('HGET', KEYS[2], job)
  local nl, period, remaining, fired, done, flying
  if value then nl, period, remaining, fired, done, flying = state(value) end
  if not nl then
    redis.call('ZREM', KEYS[1], job)
    if value then
      redis.call('HDEL', KEYS[2], job)
      out[#out + 1] = job
      out[#out + 1] = -1
      out[#out + 1] = value
    end
  else
    if done == '0' then fired = fired + 1 end
    if done == '1' or remaining == 0 then
      done = '1'
      redis.call('ZREM', KEYS[1], job)
    else
      if remaining > 0 then remaining = remaining - 1 end
      redis.call('ZADD', KEYS[1], now + period, job)
    end
    value = string.format('%d %d %d %s %d', period, remaining, fired, done, flying + 1)
      .. string.sub(value, nl)
    redis.call('HSET', KEYS[2], job, value)
    redis.call('ZADD', KEYS[3], now + lease, string.format('%d %s', fired, job))
    out[#out + 1] = job
    out[#out + 1] = fired
    out[#out + 1] = value
  end
end
for _, key in ipairs({KEYS[1], KEYS[3]}) do
  local first = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')
  if first[2] and (out[2] < 0 or tonumber(first[2]) < out[2]) then
    out[2] = tonumber(first[2])
  end
end
return out
