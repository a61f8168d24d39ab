-- retry.lua: move leased requests that failed, but may try again, to <spiderid>:delayed.
--
-- KEYS[1]: a key of the frontier shard, for routing only. On a Redis Cluster the spiderid arrives
--         prefixed with its shard's hash tag (utils/frontier/shards.py), so every key lives in one slot.
-- ARGV[1] crawl state idle TTL (s)
-- then one group of 10 values per request:
--   spiderid, domain, queue member, appid, crawlid,
--   delay (s until the retry may be popped), payload (the stored request with its new attempt and
--   lowered priority), throttle key to hold back (`<prefix><domain>`, '' = none) and for how long
--   (s; Retry-After), and the JSON of its crawl-level fields ('' = none: the payload is stored as given;
--   lib/stored.lua).
-- Returns one status per request: 'delayed', or 'unknown' when the lease was no longer held
-- (its lease expired and the reaper re-queued it: that copy is the one that runs).
-- pop.lua moves a delayed request back into its queue once its not-before time has come; the
-- crawl's progress counts it under `retrying` meanwhile, so the crawl never looks finished.

--! include domain_sets
--! include crawl_counts
--! include stored
--! include app_limits

local NF = 10
local state_ttl = tonumber(ARGV[1])
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local out = {}

-- The throttle key `key` (`<prefix><domain>`) allows no hit for `seconds`.
local function hold_back(key, d, seconds)
  if key == '' or seconds <= 0 then return end
  local loc = ds_state_find(string.sub(key, 1, #key - #d), d)
  local s = th_decode(loc.state)
  if now + seconds > s.pause then
    s.pause = now + seconds
    ds_state_keep(loc, d, s, now + seconds + 1)
  end
end

for i = 2, #ARGV, NF do
  local sid, d, m, appid, crawlid = ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3], ARGV[i + 4]
  local delay, payload = tonumber(ARGV[i + 5]), ARGV[i + 6]
  hold_back(ARGV[i + 7], d, tonumber(ARGV[i + 8]))
  local entry = d .. '\t' .. m
  if redis.call('ZREM', K.inflight(sid), entry) == 1 then
    local profile = ARGV[i + 9]
    if profile ~= '' then payload = st_profile_id(sid, appid, crawlid, profile) .. payload end
    st_put(sid, appid, crawlid, d, qm_field(m), payload)
    redis.call('ZADD', K.delayed(sid), now + delay, entry)
    cc_moved(K.crawl_progress(sid, appid, crawlid), 'inflight', 'retrying', state_ttl, t[1])
    al_settled(sid, appid, 1)
    out[#out + 1] = 'delayed'
  else
    out[#out + 1] = 'unknown'
  end
end
return out
