-- Lua: last_delivered(stream, group), the id of the entry of stream
-- its group read last ('0-0' if none, or if the stream or group is missing).
local function last_delivered(stream, group)
  local last = '0-0'
  local ok, groups = pcall(redis.call, 'XINFO', 'GROUPS', stream)
  if ok then
    for _, info in ipairs(groups) do
      local name, delivered = nil, nil
      for f = 1, #info, 2 do
        if info[f] == 'name' then name = info[f + 1] end
        if info[f] == 'last-delivered-id' then delivered = info[f + 1] end
      end
      if name == group then last = delivered end
    end
  end
  return last
end
