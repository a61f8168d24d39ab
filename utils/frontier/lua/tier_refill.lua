-- tier_refill.lua: move domains' best rows of the disk tier back into their queues (their windows).
--
-- KEYS[1]: a key of the frontier shard, for routing only (the spiderid carries the shard's tag).
-- ARGV[1] spiderid   ARGV[2] batch id (the mover's, fresh per batch)
-- then per domain: the domain, its row count k, then k triples, best first: queue score, queue
-- member, stored request.
-- The rows come from PostgreSQL inside a transaction that deletes the rows moved after this call
-- (utils/frontier/tier.py). This call writes them into the ledger, so a mover killed before that
-- DELETE commits leaves rows a successor deletes before anything else: each request is in one tier
-- at any time. Part of a domain's tail may still be in the spill stream (spilled since the last
-- drain): a row moves only while it comes before every such entry of its domain, so the window
-- keeps coming before the tail. The stream is read whole (a drain just emptied it); longer than
-- SCAN_MAX, nothing moves until the next drain.
-- Returns, per domain in ARGV order, how many of its rows moved (the first ones) ('done' when this
-- batch was applied before).

--! include domain_sets
--! include wake
--! include tier

local SCAN_MAX = 20000
local sid, batch = ARGV[1], ARGV[2]
local ledger = K.tier_ledger(sid)
if redis.call('HEXISTS', ledger, batch) == 1 then return 'done' end
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local tails, low, stream = K.tier_tails(sid), K.tier_low(sid), K.tier_spill(sid)

local groups = {}  -- {domain, first ARGV index, row count}
local wanted = {}
local i = 3
while i <= #ARGV do
  local d, k = ARGV[i], tonumber(ARGV[i + 1])
  groups[#groups + 1] = {d, i + 2, k}
  wanted[d] = true
  i = i + 2 + 3 * k
end

-- (score, member) of each wanted domain's best entry still in the stream
local bound = {}
local length = redis.call('XLEN', stream)
if length > SCAN_MAX then
  local out = {}
  for g = 1, #groups do out[g] = 0 end
  return out
end
if length > 0 then
  for _, entry in ipairs(redis.call('XRANGE', stream, '-', '+')) do
    local f = entry[2]
    local d, s, m = f[2], tonumber(f[4]), f[6]
    local b = bound[d]
    if wanted[d] and (not b or s < b[1] or (s == b[1] and m < b[2])) then bound[d] = {s, m} end
  end
end

local cc = cc_new(sid)
local rows, out = {}, {}
for g, group in ipairs(groups) do
  local d, first, k = group[1], group[2], group[3]
  local b = bound[d]
  local queue = K.queue(sid, d)
  local moved = 0
  for j = first, first + 3 * (k - 1), 3 do
    local s, m = tonumber(ARGV[j]), ARGV[j + 1]
    if b and (s > b[1] or (s == b[1] and m >= b[2])) then break end
    redis.call('ZADD', queue, ARGV[j], m)
    local crawl = cc_crawl(cc, m)
    if crawl then st_put(sid, crawl.appid, crawl.crawlid, d, qm_field(m), ARGV[j + 2]) end
    rows[#rows + 1] = {d, m}
    moved = moved + 1
  end
  out[g] = moved
  -- No row on disk and none in the stream: the tail is empty, whatever its count said.
  if (k == 0 and not b) or (moved > 0 and redis.call('HINCRBY', tails, d, -moved) <= 0) then
    redis.call('HDEL', tails, d)
  end
  if moved > 0 or not b then redis.call('SREM', low, d) end
  if moved > 0 then ds_place(sid, d, now) end
end
if #rows > 0 then
  redis.call('HSET', ledger, batch, cjson.encode(rows))
  redis.call('HINCRBY', K.tier_state(sid), 'refilled', #rows)
  wk_wake(sid)
end
return out
