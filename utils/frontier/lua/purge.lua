-- purge.lua: take a stopped or expired crawl out of the frontier, one chunk of its requests per call.
--
-- KEYS[1]: a key of the frontier shard, for routing only. On a Redis Cluster the spiderid arrives
--         prefixed with its shard's hash tag (utils/frontier/shards.py), so every key lives in one slot.
-- ARGV[1] spiderid   ARGV[2] appid   ARGV[3] crawlid
-- ARGV[4] reason: 'stopped' or 'expired' (counted under dropped_<reason> in the crawl's progress)
-- ARGV[5] unused (the expiry check is claim_expiry.lua's, before the purge)
-- ARGV[6] seconds the crawl's new children are refused (its <sid>:blacklist entry; then reusable)
-- ARGV[7] crawl state idle TTL (s)   ARGV[8] most requests to take in this call
-- Removes each of the crawl's requests (its domain index and requests hashes are its index,
-- lib/stored.lua) wherever it is (queue, delayed set, in flight) with its payload,
-- so its spider's later ack finds nothing ('unknown') and counts nothing twice.
-- Returns {purged, left}: requests removed by this call and the domains where the crawl still has
-- requests (call again while left > 0). On a Redis Cluster it runs once per frontier shard (spiderid prefixed
-- with the shard's tag).

--! include domain_sets
--! include stored
--! include app_limits

local sid, appid, crawlid, reason = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local ttl, state_ttl, limit = tonumber(ARGV[6]), tonumber(ARGV[7]), tonumber(ARGV[8])
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local blacklist = K.stopped(sid)
redis.call('ZREMRANGEBYSCORE', blacklist, '-inf', now)
redis.call('ZADD', blacklist, now + ttl, appid .. '||' .. crawlid)

local queued, inflight, delayed, purged = 0, 0, 0, 0
local touched = {}
local index = K.crawl_domains(sid, appid, crawlid)
local code = redis.call('HGET', K.crawl_codes(sid), appid .. '\t' .. crawlid)
local taken = 0
for _, d in ipairs(redis.call('SRANDMEMBER', index, limit)) do
  if taken >= limit then break end
  local requests = K.crawl_requests(sid, appid, crawlid, d)
  touched[d] = true
  for _, id in ipairs(code and redis.call('HRANDFIELD', requests, limit - taken) or {}) do
    local m = id .. code
    local entry = d .. '\t' .. m
    local q = redis.call('ZREM', K.queue(sid, d), m)
    local f = redis.call('ZREM', K.inflight(sid), entry)
    local w = redis.call('ZREM', K.delayed(sid), entry)
    redis.call('HDEL', requests, id)
    queued, inflight, delayed = queued + q, inflight + f, delayed + w
    if q + f + w > 0 then purged = purged + 1 end
    taken = taken + 1
  end
  if not code then redis.call('DEL', requests) end  -- payloads no queue member can point at
  if redis.call('EXISTS', requests) == 0 then redis.call('SREM', index, d) end
end
-- Keep each touched domain's head exact (or gone), so queue stats and pops see no phantom work.
for d in pairs(touched) do ds_place(sid, d, now) end

al_settled(sid, appid, inflight)
local left = redis.call('SCARD', index)
if left == 0 then redis.call('DEL', K.crawl_profiles(sid, appid, crawlid)) end
local progress = K.crawl_progress(sid, appid, crawlid)
if redis.call('EXISTS', progress) == 1 then
  redis.call('HINCRBY', progress, 'queued', 0 - queued)
  redis.call('HINCRBY', progress, 'inflight', 0 - inflight)
  redis.call('HINCRBY', progress, 'retrying', 0 - delayed)
  redis.call('HINCRBY', progress, 'dropped_' .. reason, purged)
  redis.call('HSET', progress, reason, tostring(now), 'updated', tostring(now))
  -- the stop/expired answer is this crawl's last word: no "finished" announcement follows it
  if left == 0 then redis.call('HSETNX', progress, 'finished', tostring(now)) end
  redis.call('EXPIRE', progress, state_ttl)
end
return {purged, left}
