-- KEYS: the stream, its byte counter. ARGV: the channel, the most bytes, the
-- most age in ms (0 for none), the message ("" to trim only). Returns the new
-- entry's id, or false.
local total = tonumber(redis.call('GET', KEYS[2]) or '0')
local id = false
if ARGV[4] ~= '' then
  id = redis.call('XADD', KEYS[1], '*', 'm', ARGV[4])
  total = total + string.len(ARGV[4])
  redis.call('PUBLISH', ARGV[1], id .. '\n' .. ARGV[4])
end
local maxbytes = tonumber(ARGV[2])
local cutoff = -1
if tonumber(ARGV[3]) > 0 then
  local now = redis.call('TIME')
  cutoff = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000) - tonumber(ARGV[3])
end
local going = true
while going do
  local oldest = redis.call('XRANGE', KEYS[1], '-', '+', 'COUNT', 100)
  if #oldest == 0 then break end
  for _, entry in ipairs(oldest) do
    local ms = tonumber(string.match(entry[1], '^(%d+)'))
    if entry[1] ~= id and (total > maxbytes or ms < cutoff) then
      redis.call('XDEL', KEYS[1], entry[1])
      total = total - string.len(entry[2][2])
    else
      going = false
      break
    end
  end
end
redis.call('SET', KEYS[2], total)
return id
