-- KEYS: the queue's mode hash, the decider's lease, the queue's stream. ARGV:
-- group, this node, then the ids of the entries this node's own switching
-- read left. Only while this node holds the lease: for every field r:NODE
-- of another node in the mode hash, the entries above the switch point
-- (gs) pending for that node are this node's now (XCLAIM ... JUSTID,
-- their delivery count kept); this node's own are those it names and still
-- holds (what else it holds above the switch point it decided); and a field
-- l goes. Answers ``{plain readers left (-1 without the lease), {id,
-- fields, ...}}``.
local mode, stream, group, me = KEYS[1], KEYS[3], ARGV[1], ARGV[2]
if redis.call('GET', KEYS[2]) ~= me then return {-1, {}} end
local since = redis.call('HGET', mode, 'gs')
if not since then return {0, {}} end
local readers = {}
local flat = redis.call('HGETALL', mode)
for f = 1, #flat, 2 do
  if string.sub(flat[f], 1, 2) == 'r:' then
    readers[#readers + 1] = flat[f]
    readers[#readers + 1] = flat[f + 1]
  end
end
local found, plain = {}, 0
local function take(id)
  local entry = redis.call('XRANGE', stream, id, id)[1]
  if entry then
    found[#found + 1] = id
    found[#found + 1] = entry[2]
  end
  return entry
end
for i = 3, #ARGV do
  -- still this node's: another decider may have taken it meanwhile
  if #redis.call('XPENDING', stream, group, ARGV[i], ARGV[i], 1, me) > 0 then take(ARGV[i]) end
end
for r = 1, #readers, 2 do
  local field, state = readers[r], readers[r + 1]
  local node = string.sub(field, 3)
  if node ~= me then
    local ok, rows = pcall(redis.call, 'XPENDING', stream, group, '(' .. since, '+', 1000000, node)
    if ok then
      for _, row in ipairs(rows) do
        if take(row[1]) then
          redis.call('XCLAIM', stream, group, me, 0, row[1], 'JUSTID')
        else
          redis.call('XACK', stream, group, row[1])
        end
      end
    end
  end
  if state == 'l' then redis.call('HDEL', mode, field) else plain = plain + 1 end
end
return {plain, found}
