-- Lua (after group and returned are set): what a node gives back to a
-- grouped queue goes to the tail of its returned stream, with how often it
-- was delivered (field r) when known, or as the node's redelivery record
-- of it says (redelivery_records.py, which goes); return_all hands
-- back everything a node's own stream holds, in order, and deletes it;
-- sweep hands back a dead node's pending entries of a stream.
local function records_of(node, stream)
  local key = stream .. ':redeliveries:' .. node
  local recorded = {}
  local flat = redis.call('HGETALL', key)
  for f = 1, #flat, 2 do recorded[flat[f]] = tonumber(flat[f + 1]) end
  redis.call('DEL', key)
  return recorded
end
local function times_of(payload, times, record)
  local own = record and redeliveries_of(payload)
  if own then
    -- the record is the whole count; r is what adds to the payload's own
    return math.max(times or 0, record + 1 - own)
  end
  return times
end
local function add(payload, times)
  if times then
    redis.call('XADD', returned, '*', 'm', payload, 'r', times)
  else
    redis.call('XADD', returned, '*', 'm', payload)
  end
end
local function payload_of(fields)
  for f = 1, #fields, 2 do
    if fields[f] == 'm' then return fields[f + 1] end
  end
  return nil
end
local function return_all(stream, node)
  if redis.call('EXISTS', stream) == 0 then return 0 end
  local recorded = records_of(node, stream)
  local delivered = {}
  local ok, rows = pcall(redis.call, 'XPENDING', stream, group, '-', '+', 1000000)
  if ok then
    for _, row in ipairs(rows) do delivered[row[1]] = row[4] end
  end
  local entries = redis.call('XRANGE', stream, '-', '+')
  for _, entry in ipairs(entries) do
    local payload = payload_of(entry[2])
    if payload then add(payload, times_of(payload, delivered[entry[1]], recorded[entry[1]])) end
  end
  redis.call('DEL', stream)
  return #entries
end
local function id_order(id)
  local ms, seq = string.match(id, '^(%d+)-(%d+)$')
  return tonumber(ms), tonumber(seq)
end
-- above: a switch point; the entries after it were never delivered (group_switch)
local function sweep(stream, node, above)
  if redis.call('EXISTS', stream) == 0 then return 0 end
  local ok, rows = pcall(redis.call, 'XPENDING', stream, group, '-', '+', 1000000, node)
  if not ok then return 0 end
  local recorded = records_of(node, stream)
  local above_ms, above_seq = nil, nil
  if above then above_ms, above_seq = id_order(above) end
  for _, row in ipairs(rows) do
    local found = redis.call('XRANGE', stream, row[1], row[1])[1]
    if found then
      local payload = payload_of(found[2])
      local times = row[4]
      if above_ms then
        local ms, seq = id_order(row[1])
        if ms > above_ms or (ms == above_ms and seq > above_seq) then times = nil end
      end
      if payload then
        add(payload, times_of(payload, times, recorded[row[1]]))
        uncount(stream .. ':bytes', body_size(payload))
      end
    end
    redis.call('XACK', stream, group, row[1])
    redis.call('XDEL', stream, row[1])
  end
  return #rows
end
