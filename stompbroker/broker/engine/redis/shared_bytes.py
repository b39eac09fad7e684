"""
A policy's ``max-length-bytes`` on the shared ``/queue/`` streams of the redis
engine (docs/policies.md, docs/cluster.md): a stream keeps no byte count, so
each stream a byte limit applies to has a counter beside it,
``PREFIX:{q:/queue/X}:bytes`` (``PREFIX:{q:/queue/X}:lane:P:bytes`` for a priority lane):
the bytes of the message bodies of its entries, those waiting and those nodes
have read and not settled, as the stream's length counts them for
``max-length``.

- The SEND's node adds the entry through :data:`ADD_SIZED`: one script that
  checks the count (and the length, when the policy sets ``max-length`` too),
  refuses, or adds and then removes the oldest entries (dropped, or moved to the
  dead-letter queue's stream) while the stream is over a limit, and writes the
  counter: one round trip per SEND.
- Every other place an entry of such a stream ends decrements the counter by
  its body size, read from the entry in Redis: a node's settling
  (:data:`.queue_settling.SETTLE_SIZED` instead of :data:`.queue_settling.SETTLE`,
  while the node sees the byte limit in force), the management's purge, move
  and delete, and the deciding node's move of an entry to a node's own stream
  (:data:`.dispatch_scripts.MOVE`; handed back, :data:`.dispatch_scripts.RETURN_NODE`
  counts it in again).  The scripts touch a
  counter only if it exists, so a queue no byte limit ever applied to has none.
- The count is repaired where it can drift (a policy set on a queue that
  already holds messages, entries ended by a node that did not yet see the
  policy, copies a node puts back after an outage): it is 0 when
  the stream is empty, never below 0, and when it says a SEND would go over a
  limit it is recounted from the stream's entries first, at most once a second
  per stream (the key ``PREFIX:{q:/queue/X}:bytes:recounted``, ``PX 1000``).

A body's size is read from the payload (:mod:`.codec`): what follows the first
newline, or the second for an entry moved to a dead-letter stream; in a
queue entry's binary form (``M``), the last length of its fixed header.
"""

from __future__ import annotations

from stompbroker.broker.engine.redis.codec import ENTRY_BODY_LENGTH

__all__ = ["ADD_SIZED", "BODY_SIZE"]

#: Lua: the body size of an entry's payload, and of an entry's fields.
BODY_SIZE = (
    """
local function body_size(payload)
  local from = 1
  if string.sub(payload, 1, 1) == 'D' then
    from = string.find(payload, '\\n', 1, true) + 1
  end
  if string.sub(payload, from, from) == 'M' then
    return (struct.unpack('>I4', payload, from + """
    + str(ENTRY_BODY_LENGTH)
    + """))
  end
  local newline = string.find(payload, '\\n', from, true)
  if newline == nil then return 0 end
  return #payload - newline
end
local function entry_size(fields)
  for i = 1, #fields, 2 do
    if fields[i] == 'm' then return body_size(fields[i + 1]) end
  end
  return 0
end
"""
)

#: KEYS: the stream, its counter, its recount mark, the dead-letter queue's
#: stream (or the stream itself when there is none), the dead-letter stream's
#: counter.  ARGV: the most bytes, the most entries (-1: no limit), the
#: overflow (or ``keep``: add and count, neither refuse nor push out), the
#: entry's payload, its body size, the dead-letter queue, a fresh message-id,
#: the reason.
#: Returns {1, entries moved to the dead-letter stream} once added, or
#: {0, 'max-length-bytes'} / {0, 'max-length'} when ``reject-publish`` refuses.
ADD_SIZED = (
    BODY_SIZE
    + """
local stream, counter = KEYS[1], KEYS[2]
local max_bytes, max_length = tonumber(ARGV[1]), tonumber(ARGV[2])
local overflow, payload, size = ARGV[3], ARGV[4], tonumber(ARGV[5])
local length = redis.call('XLEN', stream)
local bytes = 0
if length > 0 then
  bytes = tonumber(redis.call('GET', counter) or '0') or 0
  if bytes < 0 then bytes = 0 end
end
local function over(entries, total)
  if max_length >= 0 and entries > max_length then return 'max-length' end
  if total > max_bytes then return 'max-length-bytes' end
  return nil
end
if length > 0 and over(length + 1, bytes + size)
    and redis.call('SET', KEYS[3], '1', 'PX', 1000, 'NX') then
  bytes = 0
  local from = '-'
  while true do
    local page = redis.call('XRANGE', stream, from, '+', 'COUNT', 1000)
    for _, entry in ipairs(page) do
      bytes = bytes + entry_size(entry[2])
      from = '(' .. entry[1]
    end
    if #page < 1000 then break end
  end
end
if overflow == 'reject-publish' then
  local limit = over(length + 1, bytes + size)
  if limit then
    redis.call('SET', counter, bytes)
    return {0, limit}
  end
end
redis.call('XADD', stream, '*', 'm', payload)
length, bytes = length + 1, bytes + size
local moved = 0
while overflow ~= 'keep' and length > 0 and over(length, bytes) do
  local head = redis.call('XRANGE', stream, '-', '+', 'COUNT', 1)[1]
  if head == nil then break end
  local gone = entry_size(head[2])
  if overflow == 'dead-letter' and KEYS[4] ~= stream then
    for i = 1, #head[2], 2 do
      if head[2][i] == 'm' then
        local id = moved == 0 and ARGV[7] or ARGV[7] .. '-' .. moved
        local marking = 'D' .. cjson.encode({ARGV[6], id, ARGV[8]}) .. '\\n'
        redis.call('XADD', KEYS[4], '*', 'm', marking .. head[2][i + 1])
        if redis.call('EXISTS', KEYS[5]) == 1 then redis.call('INCRBY', KEYS[5], gone) end
      end
    end
    moved = moved + 1
  end
  redis.call('XDEL', stream, head[1])
  length, bytes = length - 1, bytes - gone
end
redis.call('SET', counter, bytes)
return {1, moved}
"""
)
