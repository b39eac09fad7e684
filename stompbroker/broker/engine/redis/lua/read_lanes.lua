-- KEYS: the lanes' streams, highest first (then, for a plain read, the
-- queue's mode hash). ARGV: group, consumer, count (then, for a plain read,
-- 1). Reads up to count new entries, highest lane first, making the
-- group of a lane that has none yet; a plain read reads nothing once the
-- queue had a grouped message (field g of its mode hash:
-- group_switch.py) and answers {2}, so that the node's reads are
-- decided from then on. Answers ``{1, {lane index, id, payload, group owner
-- ('' none: field o of an entry a node's own stream got from
-- dispatch_scripts.MOVE), original id ('' none: field
-- i)}...}; or, with nothing to read, {0, newest id of each lane}``
-- for the wait.
local group, consumer, left = ARGV[1], ARGV[2], tonumber(ARGV[3])
local lanes = #KEYS
if ARGV[4] then
  lanes = lanes - 1
  if redis.call('HEXISTS', KEYS[#KEYS], 'g') == 1 then return {2} end
end
local found = {}
for index = 1, lanes do
  local lane = KEYS[index]
  if left <= 0 then break end
  if redis.call('EXISTS', lane) == 1 then
    local ok, reply = pcall(redis.call, 'XREADGROUP', 'GROUP', group, consumer,
      'COUNT', left, 'STREAMS', lane, '>')
    if not ok then
      redis.call('XGROUP', 'CREATE', lane, group, '0')
      reply = redis.call('XREADGROUP', 'GROUP', group, consumer,
        'COUNT', left, 'STREAMS', lane, '>')
    end
    if reply then
      for _, entry in ipairs(reply[1][2]) do
        local fields = entry[2]
        local payload, owner, original = nil, '', ''
        for i = 1, #fields, 2 do
          if fields[i] == 'm' then payload = fields[i + 1] end
          if fields[i] == 'o' then owner = fields[i + 1] end
          if fields[i] == 'i' then original = fields[i + 1] end
        end
        if payload then
          found[#found + 1] = index
          found[#found + 1] = entry[1]
          found[#found + 1] = payload
          found[#found + 1] = owner
          found[#found + 1] = original
        end
        left = left - 1
      end
    end
  end
end
if #found > 0 then return {1, found} end
local newest = {}
for index = 1, lanes do
  local last = redis.call('XREVRANGE', KEYS[index], '+', '-', 'COUNT', 1)
  newest[index] = last[1] and last[1][1] or '0-0'
end
return {0, newest}
