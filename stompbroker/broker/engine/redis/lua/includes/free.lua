-- Whether nobody but a dead node (ARGV names them after their count) holds an
-- entry of the stream KEYS[1] in group ARGV[1]: the scripts' shared check.
local function free(stream, group, id, dead)
  local held = redis.pcall('XPENDING', stream, group, id, id, 1)
  if type(held) ~= 'table' or held.err or #held == 0 then
    return true, false
  end
  return dead[held[1][2]] == true, true
end
