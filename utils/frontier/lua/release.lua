-- release.lua: give leases back at once (a spider shutting down cleanly), first in line again.
--
-- KEYS[1]: a key of the frontier shard, for routing only. On a Redis Cluster the spiderid arrives
--         prefixed with its shard's hash tag (utils/frontier/shards.py), so every key lives in one slot.
-- ARGV[1] crawl state idle TTL (s)
-- then one group of 6 values per request: spiderid, domain, queue member, appid, crawlid,
--   queue score (-priority).
-- Returns one status per request: 'released', or 'unknown' when the lease was no longer held.
-- The attempt is not counted: the request was never tried. Idle crawlers are woken (lib/wake.lua).

--! include domain_sets
--! include wake
--! include crawl_counts
--! include app_limits

local NF = 6
local state_ttl = tonumber(ARGV[1])
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local out = {}
local touched = {}  -- domains whose queue this call changed (lib/domain_sets.lua)
local sid_of = ''
for i = 2, #ARGV, NF do
  local sid, d, m, appid, crawlid, score = ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3], ARGV[i + 4], ARGV[i + 5]
  if redis.call('ZREM', K.inflight(sid), d .. '\t' .. m) == 1 then
    sid_of = sid
    touched[d] = true
    redis.call('ZADD', K.queue(sid, d), score, m)
    cc_moved(K.crawl_progress(sid, appid, crawlid), 'inflight', 'queued', state_ttl)
    al_settled(sid, appid, 1)
    out[#out + 1] = 'released'
  else
    out[#out + 1] = 'unknown'
  end
end
for d in pairs(touched) do ds_place(sid_of, d, now) end
if sid_of ~= '' then wk_wake(sid_of) end
return out
