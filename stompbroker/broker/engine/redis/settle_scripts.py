"""
The scripts that end a shared queue's entries only where they are still the
node's own (:mod:`.queue_settling` runs them): an ACK queued before a node saw
its liveness lapse must not end an entry another node has claimed since
(docs/cluster.md, "A node that was stopped, not killed").
"""

from __future__ import annotations

from stompbroker.broker.engine.redis.shared_bytes import BODY_SIZE

__all__ = ["GIVE_BACK", "SETTLE", "SETTLE_BATCH", "SETTLE_SIZED"]

#: KEYS: a stream, this node's redelivery records of it (:mod:`.redelivery_records`),
#: this node's liveness key, the stream's byte counter (:mod:`.shared_bytes`).
#: ARGV: group, this node, 1 if some of the entries have a record (else 0), the
#: node's epoch when it settled them (:attr:`~.liveness.Liveness.epoch`), then
#: entry ids.  Ends (``XACK``, ``XDEL``) each entry unless another consumer
#: holds it.  While the liveness key still holds that epoch it has not expired
#: since, so no node has claimed anything from this one and all are ended at
#: once (one ``GET`` per script).  Otherwise one ``XPENDING id id 1`` per entry
#: asks whom it is pending to (a seek in the group's pending list; ``XCLAIM``
#: cannot ask it: it takes an entry from whoever holds it); an entry pending to
#: nobody (a copy Redis handed out again after a roll-back, or one whose
#: ``XDEL`` was lost) is ended too.  Answers the ids left to the nodes that hold
#: them.  :data:`SETTLE_SIZED` also takes the bodies' bytes off the counter.
_SETTLE = """
local stream, group, me = KEYS[1], ARGV[1], ARGV[2]
local ended, foreign = {}, {}
if redis.call('GET', KEYS[3]) == ARGV[4] then
  ended = {unpack(ARGV, 5)}
else
  for i = 5, #ARGV do
    local id = ARGV[i]
    local row = redis.pcall('XPENDING', stream, group, id, id, 1)
    if type(row) == 'table' and row[1] and row[1][2] ~= me then
      foreign[#foreign + 1] = id
    else
      ended[#ended + 1] = id
    end
  end
end
if #ended > 0 then
  redis.call('XACK', stream, group, unpack(ended))
  -- sized
  redis.call('XDEL', stream, unpack(ended))
  if ARGV[3] == '1' then redis.call('HDEL', KEYS[2], unpack(ended)) end
end
return foreign
"""
SETTLE = _SETTLE
SETTLE_SIZED = BODY_SIZE + _SETTLE.replace(
    "  -- sized\n",
    """  local gone = 0
  for _, id in ipairs(ended) do
    local found = redis.call('XRANGE', stream, id, id)
    if #found > 0 then gone = gone + entry_size(found[1][2]) end
  end
  if gone > 0 and redis.call('EXISTS', KEYS[4]) == 1 then
    if redis.call('DECRBY', KEYS[4], gone) < 0 then redis.call('SET', KEYS[4], 0) end
  end
""",
)

#: KEYS and the first four ARGV as :data:`SETTLE`'s, then per entry: its id,
#: the stream it goes back to, the message's payload, and the counter to count
#: its body's size into ('' for none: :mod:`.shared_bytes`) with that size.
#: ``XADD``\\ s each message again, with its original id (field ``i``: the old
#: entry's own, or the ``i`` it carries), and ends its old entry, unless another
#: consumer holds the entry (that node delivers it: a second copy would be a
#: duplicate).  Answers those ids.
GIVE_BACK = """
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
"""

#: Most entries one script ends (Lua's ``unpack`` takes a few thousand at most).
SETTLE_BATCH = 1000
