-- Purge one page: KEYS[1] the stream, KEYS[2] its byte counter; ARGV: group,
-- start, count, dead nodes. Returns {purged, last id looked at, entries
-- looked at}.
--- @include "free"
--- @include "body_size"
--- @include "uncount"

local dead = {}
for i = 4, #ARGV do dead[ARGV[i]] = true end
local page = redis.call('XRANGE', KEYS[1], ARGV[2], '+', 'COUNT', ARGV[3])
local purged, last, gone = 0, '', 0
for _, entry in ipairs(page) do
  last = entry[1]
  local ok, pending = free(KEYS[1], ARGV[1], last, dead)
  if ok then
    if pending then redis.call('XACK', KEYS[1], ARGV[1], last) end
    redis.call('XDEL', KEYS[1], last)
    gone = gone + entry_size(entry[2])
    purged = purged + 1
  end
end
uncount(KEYS[2], gone)
return {purged, last, #page}
