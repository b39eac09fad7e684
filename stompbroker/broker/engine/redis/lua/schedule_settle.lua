-- KEYS: the flying set, the jobs hash. ARGV: job, fired, job, fired, ...: the
-- deliveries of one claim, routed. Ends their leases; a job whose last
-- delivery is routed, and no other in flight, is removed.
--- @include "schedule_state"

for i = 1, #ARGV, 2 do
  local job = ARGV[i]
  if redis.call('ZREM', KEYS[1], ARGV[i + 1] .. ' ' .. job) == 1 then
    local value = redis.call('HGET', KEYS[2], job)
    local nl, period, remaining, fired, done, flying
    if value then nl, period, remaining, fired, done, flying = state(value) end
    if nl then
      flying = math.max(flying - 1, 0)
      if done == '1' and flying == 0 then
        redis.call('HDEL', KEYS[2], job)
      else
        redis.call('HSET', KEYS[2], job,
          string.format('%d %d %d %s %d', period, remaining, fired, done, flying)
          .. string.sub(value, nl))
      end
    end
  end
end
return 0
