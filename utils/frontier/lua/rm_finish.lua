-- rm_finish.lua: mark crawls finished once nothing of theirs is queued, in flight or delayed.
--
-- KEYS[1]: a key of the frontier shard, for routing only. On a Redis Cluster the spiderid arrives
--         prefixed with its shard's hash tag (utils/frontier/shards.py), so every key lives in one slot.
-- ARGV: spiderid, appid, crawlid for each crawl to check.
-- A crawl is finished when queued + inflight + retrying == 0 and enqueued > 0. The check and
-- the HSETNX of `finished` happen in one call, so no enqueue slips in between and exactly one
-- redis monitor announces it.
-- Returns one status per crawl: 'finished' (marked now: announce it), 'done' (marked before),
-- 'open' (work left) or 'gone' (its progress expired: drop it from shoal:crawls; its code is
-- forgotten).

--! include keys

-- A crawl with no request left in the frontier no longer needs its code nor its profiles
-- (enqueue.lua hands out new ones if the crawl ever queues again).
local function forget_code(sid, appid, crawlid)
  if redis.call('EXISTS', K.crawl_domains(sid, appid, crawlid)) == 1 then return end
  redis.call('DEL', K.crawl_profiles(sid, appid, crawlid))
  local name = appid .. '\t' .. crawlid
  local code = redis.call('HGET', K.crawl_codes(sid), name)
  if code then
    redis.call('HDEL', K.crawl_codes(sid), name)
    redis.call('HDEL', K.crawl_names(sid), code)
  end
end

local out = {}
for i = 1, #ARGV, 3 do
  local progress = K.crawl_progress(ARGV[i], ARGV[i + 1], ARGV[i + 2])
  local v = redis.call('HMGET', progress, 'queued', 'inflight', 'retrying', 'enqueued', 'finished')
  local status = 'open'
  if redis.call('EXISTS', progress) == 0 then
    status = 'gone'
    forget_code(ARGV[i], ARGV[i + 1], ARGV[i + 2])
  elseif v[5] then
    status = 'done'
  elseif (tonumber(v[4]) or 0) > 0
      and (tonumber(v[1]) or 0) + (tonumber(v[2]) or 0) + (tonumber(v[3]) or 0) <= 0 then
    local t = redis.call('TIME')
    redis.call('HSET', progress, 'finished', tostring(tonumber(t[1]) + tonumber(t[2]) / 1000000))
    status = 'finished'
  end
  out[#out + 1] = status
end
return out
