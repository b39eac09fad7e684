-- KEYS: the stream. ARGV: the limit, the entry's payload. Returns the new
-- entry's id, or 0 when the stream holds the limit already.
if redis.call('XLEN', KEYS[1]) >= tonumber(ARGV[1]) then return 0 end
return redis.call('XADD', KEYS[1], '*', 'm', ARGV[2])
