-- tier_trim.lua: drop spill stream entries that PostgreSQL holds now (its COPY committed).
--
-- KEYS[1]: a key of the frontier shard, for routing only (the spiderid carries the shard's tag).
-- ARGV[1] spiderid, then pairs: stream entry id, its domain.
-- A mover killed between its commit and this call copies the entries again (ON CONFLICT DO
-- NOTHING adds nothing); a domain's refill waits until its count here is 0 (tier_refill.lua).
-- Returns the entries dropped.

--! include keys

local sid = ARGV[1]
local stream, pending = K.tier_spill(sid), K.tier_pending(sid)
local n = 0
for i = 2, #ARGV, 2 do
  if redis.call('XDEL', stream, ARGV[i]) == 1 then
    n = n + 1
    if redis.call('HINCRBY', pending, ARGV[i + 1], -1) <= 0 then redis.call('HDEL', pending, ARGV[i + 1]) end
  end
end
return n
