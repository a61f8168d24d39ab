-- ack.lua: settle leased requests: their page is on Kafka, or they finally failed or were dropped.
--
-- KEYS[1]: a key of the frontier shard, for routing only. On a Redis Cluster the spiderid arrives
--         prefixed with its shard's hash tag (utils/frontier/shards.py), so every key lives in one slot.
-- ARGV[1] crawl state idle TTL (s)
-- then one group of 6 values per request: spiderid, domain, queue member, appid, crawlid, outcome
--   (outcome = the progress counter to count it under: crawled, failed, dead, dropped_robots, ...).
-- Returns one status per request: 'acked', or 'unknown' when the request was already settled
-- or purged (a duplicate ack after a lease was re-queued counts nothing twice).
-- A request whose lease expired and was re-queued (or that waits to retry) is taken out again here.
-- An admitted request that ends without a page gives its page-limit slot back, so that
-- domain_max_pages counts crawled pages.

--! include domain_sets
--! include stored
--! include app_limits

local NF = 6
local state_ttl = tonumber(ARGV[1])
local out = {}

local function give_back_page_slots(sid, d, crawlid)
  for _, key in ipairs({K.domain_pages(sid, d, crawlid), K.global_pages(sid, d, crawlid)}) do
    if tonumber(redis.call('GET', key) or '0') > 0 then redis.call('DECR', key) end
  end
end

for i = 2, #ARGV, NF do
  local sid, d, m, appid, crawlid, outcome = ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3], ARGV[i + 4], ARGV[i + 5]
  local entry = d .. '\t' .. m
  local was_inflight = redis.call('ZREM', K.inflight(sid), entry)
  local was_queued = 0
  if redis.call('ZSCORE', K.queue(sid, d), m) then  -- re-queued by the reaper meanwhile
    was_queued = redis.call('ZREM', K.queue(sid, d), m)
    ds_place(sid, d, tonumber(redis.call('TIME')[1]))
  end
  local was_delayed = redis.call('ZREM', K.delayed(sid), entry)
  st_drop(sid, appid, crawlid, d, qm_field(m))
  local progress = K.crawl_progress(sid, appid, crawlid)
  if was_inflight == 1 or was_queued == 1 or was_delayed == 1 then
    if was_inflight == 1 then
      redis.call('HINCRBY', progress, 'inflight', -1)
      al_settled(sid, appid, 1)
    end
    if was_queued == 1 then redis.call('HINCRBY', progress, 'queued', -1) end
    if was_delayed == 1 then redis.call('HINCRBY', progress, 'retrying', -1) end
    redis.call('HINCRBY', progress, outcome, 1)
    redis.call('HSET', progress, 'updated', redis.call('TIME')[1])
    redis.call('EXPIRE', progress, state_ttl)
    if outcome ~= 'crawled' then give_back_page_slots(sid, d, crawlid) end
    out[#out + 1] = 'acked'
  else
    out[#out + 1] = 'unknown'
  end
end
return out
