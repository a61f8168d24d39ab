-- tier_refill.lua: move a domain's best rows of the disk tier back into its queue (its window).
--
-- KEYS[1]: a key of the frontier shard, for routing only (the spiderid carries the shard's tag).
-- ARGV[1] spiderid   ARGV[2] batch id (the mover's, fresh per batch)   ARGV[3] domain
-- then one triple per row, best first: queue score, queue member, stored request.
-- The rows come from PostgreSQL inside a transaction that deletes them after this call
-- (utils/frontier/tier.py). This call writes the batch into the ledger with its rows, so a mover
-- killed before that DELETE commits leaves rows a successor deletes before anything else: each
-- request is in one tier at any time. Refused ('pending') while some of the domain's tail is still
-- in the spill stream: the rows in hand might not be the tail's best.
-- Returns the rows moved, 'done' (this batch was applied before) or 'pending'.

--! include domain_sets
--! include wake
--! include tier

local sid, batch, d = ARGV[1], ARGV[2], ARGV[3]
local ledger = K.tier_ledger(sid)
if redis.call('HEXISTS', ledger, batch) == 1 then return 'done' end
if tonumber(redis.call('HGET', K.tier_pending(sid), d) or '0') > 0 then return 'pending' end
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local queue = K.queue(sid, d)
local cc = cc_new(sid)
local rows = {}
for i = 4, #ARGV, 3 do
  local m = ARGV[i + 1]
  redis.call('ZADD', queue, ARGV[i], m)
  local crawl = cc_crawl(cc, m)
  if crawl then st_put(sid, crawl.appid, crawl.crawlid, d, string.sub(m, 1, 16), ARGV[i + 2]) end
  rows[#rows + 1] = {d, m}
end
local tails = K.tier_tails(sid)
-- No row while none is in the stream: the tail is empty, whatever its count said.
if #rows == 0 or redis.call('HINCRBY', tails, d, -#rows) <= 0 then redis.call('HDEL', tails, d) end
redis.call('SREM', K.tier_low(sid), d)
if #rows > 0 then redis.call('HSET', ledger, batch, cjson.encode(rows)) end
redis.call('HINCRBY', K.tier_state(sid), 'refilled', #rows)
ds_place(sid, d, now)
wk_wake(sid)
return #rows
