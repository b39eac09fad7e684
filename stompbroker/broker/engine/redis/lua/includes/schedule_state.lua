-- Lua: reads a job's state line: the newline's index, then period, deliveries
-- left, fired, done ('0'/'1'), flying; nil for a line CLAIM did not
-- write.
local function state(value)
  local nl = string.find(value, '\n', 1, true)
  if not nl then return nil end
  local period, remaining, fired, done, flying =
    string.match(string.sub(value, 1, nl - 1), '^(%d+) (%-?%d+) (%d+) ([01]) ?(%d*)$')
  if not period then return nil end
  return nl, tonumber(period), tonumber(remaining), tonumber(fired), done, tonumber(flying) or 0
end
