-- body_size(payload): the body size of an entry's payload (a dead-lettered
-- one's after its first line); entry_size(fields): of an entry's fields.  35
-- is codec.ENTRY_BODY_LENGTH, where a binary entry ('M') keeps its body's
-- length (a test holds them equal).
local function body_size(payload)
  local from = 1
  if string.sub(payload, 1, 1) == 'D' then
    from = string.find(payload, '\n', 1, true) + 1
  end
  if string.sub(payload, from, from) == 'M' then
    return (struct.unpack('>I4', payload, from + 35))
  end
  local newline = string.find(payload, '\n', from, true)
  if newline == nil then return 0 end
  return #payload - newline
end
local function entry_size(fields)
  for i = 1, #fields, 2 do
    if fields[i] == 'm' then return body_size(fields[i + 1]) end
  end
  return 0
end
