-- lib/tier.lua: the disk tier's hooks in enqueue.lua and pop.lua (utils/frontier/tier.py moves the rest).
--
-- With the tier on, a domain keeps at most `window` requests in its queue (the window); the rest of
-- its queue (its tail) is in the spill stream K.tier_spill (on its way) or in PostgreSQL. The queue's
-- order (score, then member bytes) is the service order, and the tier keeps it: every request in a
-- window comes before every request in its tail, so a request joins the tail when it is no better
-- than its window's worst while the tail is not empty, and a full window's worst moves to the tail.
-- A move is one atomic step of a script: a request is in exactly one tier at any time. Members are
-- opaque to the tier but for their requests-hash field and crawl code (lib/member.lua).
--
-- tr_admit(sid, d, queue, m, score, payload, window): after member `m` joined `queue`, before its
--   payload is stored, keep the window's rule; true when `m` itself went to the tail.
-- tr_leased(sid, d, queue, emptied): after a lease from `queue` (`emptied`: it is empty now); a
--   domain with a tail whose window fell to half is listed for a refill; an emptied one is counted
--   (`dry`: the figure the tier must keep at 0).

--! include keys
--! include member
--! include stored
--! include crawl_counts

local tr_on = nil  -- does this shard hold any tail? (read once per call)

local tr_window_set = false  -- the window is written into the tier's state once per call

-- Put member `m` (score `score`, stored request `payload`) of domain `d` into the spill stream.
local function tr_spill_as(sid, d, m, score, payload, window)
  redis.call('XADD', K.tier_spill(sid), '*', 'd', d, 's', score, 'm', m, 'c', qm_code(m), 'p', payload)
  redis.call('HINCRBY', K.tier_tails(sid), d, 1)
  local state = K.tier_state(sid)
  redis.call('HINCRBY', state, 'spilled', 1)
  if not tr_window_set then
    redis.call('HSET', state, 'window', window)
    tr_window_set = true
  end
  tr_on = true
end

-- Move window member `m` of domain `d` into the spill stream, payload and all.
local function tr_spill(sid, d, queue, m, window)
  local score = redis.call('ZSCORE', queue, m)
  local crawl = cc_crawl(cc_new(sid), m)
  local id = qm_field(m)
  local payload = crawl and st_get(sid, crawl.appid, crawl.crawlid, d, id) or ''
  redis.call('ZREM', queue, m)
  if crawl then st_drop(sid, crawl.appid, crawl.crawlid, d, id) end
  tr_spill_as(sid, d, m, score, payload, window)
end

-- Returns true when `m` itself went to the tail (its payload is in the stream: not to be stored).
local function tr_admit(sid, d, queue, m, score, payload, window)
  local tail = tonumber(redis.call('HGET', K.tier_tails(sid), d) or '0')
  local size = redis.call('ZCARD', queue)
  if tail == 0 and size <= window then return false end
  local worst = redis.call('ZRANGE', queue, -1, -1)[1]
  local itself = false
  if worst == m and (tail > 0 or size > window) then
    redis.call('ZREM', queue, m)
    tr_spill_as(sid, d, m, score, payload, window)
    itself = true
    size = size - 1
  elseif size > window then
    tr_spill(sid, d, queue, worst, window)
    size = size - 1
  end
  if size <= window / 2 then redis.call('SADD', K.tier_low(sid), d) end
  return itself
end

local function tr_leased(sid, d, queue, emptied)
  if tr_on == nil then tr_on = redis.call('EXISTS', K.tier_tails(sid)) == 1 end
  if not tr_on or not redis.call('HGET', K.tier_tails(sid), d) then return end
  local state = K.tier_state(sid)
  if emptied then redis.call('HINCRBY', state, 'dry', 1) end
  local window = tonumber(redis.call('HGET', state, 'window') or '0')
  if redis.call('ZCARD', queue) <= window / 2 then redis.call('SADD', K.tier_low(sid), d) end
end
