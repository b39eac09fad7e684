-- KEYS and the first four ARGV as SETTLE's, then per entry: its id,
-- the stream it goes back to, the message's payload, and the counter to count
-- its body's size into ('' for none: shared_bytes.py) with that size.
-- XADDs each message again, with its original id (field i: the old
-- entry's own, or the i it carries), and ends its old entry, unless
-- another consumer holds the entry (that node delivers it: a second copy
-- would be a duplicate). Answers those ids.
local stream, group, me = KEYS[1], ARGV[1], ARGV[2]
local checked = redis.call('GET', KEYS[3]) ~= ARGV[4]
local foreign = {}
for i = 5, #ARGV, 5 do
  local id = ARGV[i]
  local row = checked and redis.pcall('XPENDING', stream, group, id, id, 1)
  if type(row) == 'table' and row[1] and row[1][2] ~= me then
    foreign[#foreign + 1] = id
  else
    local original = id
    local found = redis.call('XRANGE', stream, id, id)[1]
    if found then
      for f = 1, #found[2], 2 do
        if found[2][f] == 'i' then original = found[2][f + 1] end
      end
    end
    redis.call('XADD', ARGV[i + 1], '*', 'm', ARGV[i + 2], 'i', original)
    if ARGV[i + 3] ~= '' then redis.call('INCRBY', ARGV[i + 3], ARGV[i + 4]) end
    redis.call('XACK', stream, group, id)
    redis.call('XDEL', stream, id)
    if ARGV[3] == '1' then redis.call('HDEL', KEYS[2], id) end
  end
end
return foreign
