-- ack.lua: settle leased requests: their page is on Kafka, or they finally failed or were dropped.
--
-- KEYS: none (single Redis node; keys follow utils/keys.py).
-- ARGV[1] crawl state idle TTL (s)
-- then one group of 6 values per request: spiderid, domain, request id, appid, crawlid, outcome
--   (outcome = the progress counter to count it under: crawled, failed, dead, dropped_robots, ...).
-- Returns one status per request: 'acked', or 'unknown' when the request was already settled
-- or purged (a duplicate ack after a lease was re-queued counts nothing twice).
-- A request whose lease expired and was re-queued is taken out of its queue again here.

local NF = 6
local state_ttl = tonumber(ARGV[1])
local out = {}
for i = 2, #ARGV, NF do
  local sid, d, m, appid, crawlid, outcome = ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3], ARGV[i + 4], ARGV[i + 5]
  local was_inflight = redis.call('ZREM', sid .. ':inflight', d .. '\t' .. m)
  local was_queued = redis.call('ZREM', sid .. ':' .. d .. ':queue', m)
  redis.call('HDEL', sid .. ':' .. d .. ':requests', m)
  redis.call('SREM', sid .. ':crawl:' .. appid .. ':' .. crawlid .. ':index', d .. '\t' .. m)
  local progress = sid .. ':crawl:' .. appid .. ':' .. crawlid .. ':progress'
  if was_inflight == 1 or was_queued == 1 then
    if was_inflight == 1 then redis.call('HINCRBY', progress, 'inflight', -1) end
    if was_queued == 1 then redis.call('HINCRBY', progress, 'queued', -1) end
    redis.call('HINCRBY', progress, outcome, 1)
    redis.call('HSET', progress, 'updated', redis.call('TIME')[1])
    redis.call('EXPIRE', progress, state_ttl)
    out[#out + 1] = 'acked'
  else
    out[#out + 1] = 'unknown'
  end
end
return out
