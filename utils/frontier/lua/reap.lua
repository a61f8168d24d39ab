-- reap.lua: settle one spider's expired leases: back to their queue, or dead after RETRY_TIMES.
--
-- KEYS[1]: a key of the frontier shard, for routing only. On a Redis Cluster the spiderid arrives
--         prefixed with its shard's hash tag (utils/frontier/shards.py), so every key lives in one slot.
-- ARGV[1] spiderid   ARGV[2] most leases to settle   ARGV[3] RETRY_TIMES   ARGV[4] crawl state TTL (s)
-- A lease has expired when its deadline in <sid>:inflight (Redis server time) has passed: the
-- spider that took it died or hung. The stored request's "attempt" counts its retries so far:
-- below RETRY_TIMES the request goes back to its domain queue under its own id (it keeps its
-- place among equal priorities) with attempt + 1 (progress inflight - 1, queued + 1, reaped + 1);
-- at RETRY_TIMES it is dead: its payload removed (progress inflight - 1, dead + 1),
-- and the caller writes its dead-letter record and failure page.
-- Returns 6 values per settled lease: 'requeued' or 'dead', domain, queue member, the stored
-- request (as re-queued, or as it was when it died), its crawl `<appid>\t<crawlid>` and the JSON of
-- its crawl-level fields ('' = none; lib/stored.lua).

--! include domain_sets
--! include crawl_counts
--! include wake
--! include stored
--! include app_limits

local sid, limit, retry_times, state_ttl = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local inflight = K.inflight(sid)
local crawls = cc_new(sid)  -- the crawls met (lib/crawl_counts.lua)

local out = {}
local touched = {}  -- domains whose queue this call changed (lib/domain_sets.lua)
for _, entry in ipairs(redis.call('ZRANGEBYSCORE', inflight, '-inf', now, 'LIMIT', 0, limit)) do
  redis.call('ZREM', inflight, entry)
  local tab = string.find(entry, '\t', 1, true)
  local d, m = string.sub(entry, 1, (tab or 1) - 1), string.sub(entry, (tab or 0) + 1)
  local crawl = tab and cc_crawl(crawls, m)
  local id = qm_field(m)
  local payload = crawl and st_get(sid, crawl.appid, crawl.crawlid, d, id)
  if crawl then al_settled(sid, crawl.appid, 1) end
  if payload then
    local name, appid, crawlid, progress = crawl.name, crawl.appid, crawl.crawlid, crawl.progress
    local pid, priority, attempt = st_fields(payload)
    local profile = pid and pid ~= '' and redis.call('HGET', K.crawl_profiles(sid, appid, crawlid), pid) or ''
    if attempt >= retry_times then
      st_drop(sid, appid, crawlid, d, id)
      -- a request that ends without a page gives its page-limit slot back (as ack.lua)
      for _, key in ipairs({K.domain_pages(sid, d, crawlid), K.global_pages(sid, d, crawlid)}) do
        if tonumber(redis.call('GET', key) or '0') > 0 then redis.call('DECR', key) end
      end
      redis.call('HINCRBY', progress, 'dead', 1)
      out[#out + 1] = 'dead'
    else
      payload = st_with_attempt(payload, attempt + 1)
      st_put(sid, appid, crawlid, d, id, payload)
      touched[d] = true
      redis.call('ZADD', K.queue(sid, d), -priority, m)
      redis.call('HINCRBY', progress, 'queued', 1)
      redis.call('HINCRBY', progress, 'reaped', 1)
      out[#out + 1] = 'requeued'
    end
    redis.call('HINCRBY', progress, 'inflight', -1)
    redis.call('HSET', progress, 'updated', tostring(now))
    redis.call('EXPIRE', progress, state_ttl)
    out[#out + 1] = d
    out[#out + 1] = m
    out[#out + 1] = payload
    out[#out + 1] = name
    out[#out + 1] = profile
  end
end
for d in pairs(touched) do ds_place(sid, d, now) end
if next(touched) then wk_wake(sid) end  -- requeued work: an idle crawler takes it at once
return out
