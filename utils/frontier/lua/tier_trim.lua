-- tier_trim.lua: drop spill stream entries that PostgreSQL holds now (its COPY committed).
--
-- KEYS[1]: a key of the frontier shard, for routing only (the spiderid carries the shard's tag).
-- ARGV[1] spiderid, then the stream entry ids.
-- A mover killed between its commit and this call copies the entries again (ON CONFLICT DO
-- NOTHING adds nothing). Returns the entries dropped.

--! include keys

local stream = K.tier_spill(ARGV[1])
local n = 0
for i = 2, #ARGV, 4000 do
  n = n + redis.call('XDEL', stream, unpack(ARGV, i, math.min(i + 3999, #ARGV)))
end
return n
