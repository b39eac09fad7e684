-- A SEND's duplicate-detection id, checked and recorded in its destination's
-- window together with the message's publication, so that two nodes racing on
-- one id route it once (stompbroker.broker.engine.redis.duplicates).
--
-- KEYS[1]     the destination's window: a sorted set of ids scored by the
--             Redis server's time in ms (one clock for every node)
-- KEYS[2..]   streams to append the message to (a queue's stream or lane, the
--             streams of the durable subscriptions a topic message matches)
-- ARGV[1]     the id
-- ARGV[2]     the window's length in ms
-- ARGV[3]     the most ids the window keeps
-- ARGV[4]     the stream entry (field "m")
-- ARGV[5]     a channel to PUBLISH to ("" for none: a queue message)
-- ARGV[6]     what to publish there (a topic batch of one message)
--
-- Returns 1 when the id was new (it joined the window, the message was added
-- and published), 0 for a repeat (nothing was written).
local window = KEYS[1]
local id = ARGV[1]
local window_ms = tonumber(ARGV[2])
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', window, '-inf', now - window_ms)
if redis.call('ZSCORE', window, id) then
  return 0
end
redis.call('ZADD', window, now, id)
local most = tonumber(ARGV[3])
if redis.call('ZCARD', window) > most then
  redis.call('ZREMRANGEBYRANK', window, 0, -(most + 1))
end
-- A destination that stops getting ids leaves no window behind.
redis.call('PEXPIRE', window, window_ms)
for index = 2, #KEYS do
  redis.call('XADD', KEYS[index], '*', 'm', ARGV[4])
end
if ARGV[5] ~= '' then
  redis.call('PUBLISH', ARGV[5], ARGV[6])
end
return 1
