-- Lua: the redelivery count a queue entry's payload carries, in either form
-- (codec.encode_entry's binary one: a big-endian count after the
-- marker, the flags and the priority; or the JSON one: the sixth field of its
-- first line); nil for anything else.
local function redeliveries_of(payload)
  local kind = string.sub(payload, 1, 1)
  if kind == 'M' then
    local a, b, c, d = string.byte(payload, 4, 7)
    if not d then return nil end
    return ((a * 256 + b) * 256 + c) * 256 + d
  elseif kind == '[' then
    local meta = cjson.decode(string.sub(payload, 1, string.find(payload, '\n', 1, true) - 1))
    return meta[6]
  end
  return nil
end
