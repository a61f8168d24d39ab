-- tier_trim.lua: drop the spill stream's entries that PostgreSQL holds now (its COPY committed).
--
-- KEYS[1]: a key of the frontier shard, for routing only (the spiderid carries the shard's tag).
-- ARGV[1] spiderid   ARGV[2] the last entry id copied (the copy always starts at the stream's head)
-- XTRIM MINID drops whole listpack nodes, where XDEL would leave each entry flagged in its node for
-- every later XRANGE to skip. A mover killed between its commit and this call copies the entries
-- again (ON CONFLICT DO NOTHING adds nothing). Returns the entries dropped.

--! include keys

local ms, seq = string.match(ARGV[2], '^(%d+)%-(%d+)$')
return redis.call('XTRIM', K.tier_spill(ARGV[1]), 'MINID', ms .. '-' .. (tonumber(seq) + 1))
