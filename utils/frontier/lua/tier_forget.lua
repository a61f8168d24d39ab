-- tier_forget.lua: a stopped or expired crawl's rows of the disk tier leave the frontier's counts.
--
-- KEYS[1]: a key of the frontier shard, for routing only (the spiderid carries the shard's tag).
-- ARGV[1] spiderid   ARGV[2] batch id   ARGV[3] appid   ARGV[4] crawlid
-- ARGV[5] reason ('stopped' or 'expired': counted under dropped_<reason>)   ARGV[6] crawl state idle TTL (s)
-- then pairs: domain, queue member of each row.
-- The rows are deleted from PostgreSQL after this call, in the transaction that selected them; the
-- ledger entry written here makes a successor delete them if the mover dies first (tier_refill.lua).
-- Returns the rows counted, or 'done' (this batch was applied before).

--! include keys

local sid, batch, appid, crawlid, reason = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5]
local ledger = K.tier_ledger(sid)
if redis.call('HEXISTS', ledger, batch) == 1 then return 'done' end
local tails, low = K.tier_tails(sid), K.tier_low(sid)
local rows = {}
for i = 7, #ARGV, 2 do
  local d = ARGV[i]
  if redis.call('HINCRBY', tails, d, -1) <= 0 then
    redis.call('HDEL', tails, d)
    redis.call('SREM', low, d)
  end
  rows[#rows + 1] = {d, ARGV[i + 1]}
end
if #rows == 0 then return 0 end
redis.call('HSET', ledger, batch, cjson.encode(rows))
local progress = K.crawl_progress(sid, appid, crawlid)
if redis.call('EXISTS', progress) == 1 then
  redis.call('HINCRBY', progress, 'queued', -#rows)
  redis.call('HINCRBY', progress, 'dropped_' .. reason, #rows)
  redis.call('EXPIRE', progress, tonumber(ARGV[6]))
end
return #rows
