-- pop.lua: lease the highest-priority requests whose domain throttle allows one now.
--
-- KEYS[1]: a key of the frontier shard, for routing only. On a Redis Cluster the spiderid arrives
--         prefixed with its shard's hash tag (utils/frontier/shards.py), so every key lives in one slot.
-- ARGV[1] spiderid             ARGV[2] most requests to hand out
-- ARGV[3] lease seconds        ARGV[4] most domain heads to examine per request
-- ARGV[5] throttle key prefix ('', '<spider>:', '<ip>:' or '<spider>:<ip>:')
-- ARGV[6] default hits (<= 0 = unthrottled)   ARGV[7] default window (s)
-- ARGV[8] moderated ('1' = spread hits evenly over the window)
-- ARGV[9] JSON {domain: [hits, window]} overrides   ARGV[10] JSON [blacklisted domains]
-- ARGV[11] crawl state idle TTL (s)   ARGV[12] most due retries to move back into queues per call
-- Returns a flat array: the milliseconds until a throttled domain with queued requests is next
-- allowed (-1 = none is waiting on its throttle), how many domains with work their throttle held
-- back, the best head score left in this shard ('' = none queued), then domain, queue member,
-- payload and crawl (`<appid>\t<crawlid>`, '' if unknown) for
-- each lease.
-- Priority is global: among every domain whose throttle allows a request now, the best score
-- wins, ties go to the oldest request id. A throttle hit is spent only for a request handed out.
-- Each leased request moves into <spiderid>:inflight scored by its lease deadline.
-- Requests waiting to retry (<spiderid>:delayed, scored by their not-before time) go back into
-- their queue first, once due. A throttle key T is also held back by `T:throttle_pause` (a
-- not-before time: Retry-After answers, robots.txt Crawl-delay) and `T:throttle_delay` (seconds
-- between two hits, from Crawl-delay), which apply even when the domain is otherwise unthrottled.

local sid, max_items, lease = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local scan, prefix = tonumber(ARGV[4]), ARGV[5]
local hits, window, moderated = tonumber(ARGV[6]), tonumber(ARGV[7]), ARGV[8] == '1'
local overrides = cjson.decode(ARGV[9])
local blacklist = {}
for _, d in ipairs(cjson.decode(ARGV[10])) do blacklist[d] = true end
local state_ttl, promote_max = tonumber(ARGV[11]), tonumber(ARGV[12] or '100')
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local heads, inflight = sid .. ':heads', sid .. ':inflight'
local allowed = {}
local next_ready = -1  -- earliest time a throttled, non-empty domain may hand out again
local denied = 0  -- domains examined this call that their throttle held back (a metric)

local function note_ready(at)
  if next_ready < 0 or at < next_ready then next_ready = at end
end

local function limits(domain)
  local o = overrides[domain]
  if o then return tonumber(o[1]), tonumber(o[2]) end
  return hits, window
end

local function throttle_allows(domain)
  local key = prefix .. domain
  local pause = tonumber(redis.call('GET', key .. ':throttle_pause') or '0')
  if pause > now then
    note_ready(pause)
    denied = denied + 1
    return false
  end
  local h, w = limits(domain)
  if h <= 0 then return true end
  redis.call('ZREMRANGEBYSCORE', key .. ':throttle_window', '-inf', now - w)
  if redis.call('ZCARD', key .. ':throttle_window') >= h then
    local oldest = redis.call('ZRANGE', key .. ':throttle_window', 0, 0, 'WITHSCORES')
    note_ready(tonumber(oldest[2]) + w)
    denied = denied + 1
    return false
  end
  if moderated and h > 1 then
    local slot = tonumber(redis.call('GET', key .. ':throttle_time') or '0')
    if now < slot + w / h then
      note_ready(slot + w / h)
      denied = denied + 1
      return false
    end
  end
  return true
end

-- The moderated slot advances by exactly one interval while the domain keeps up, so late polls
-- do not drift the rate below hits/window; after an idle spell it restarts from now.
local function spend_hit(domain, member)
  local key = prefix .. domain
  local delay = tonumber(redis.call('GET', key .. ':throttle_delay') or '0')
  if delay > 0 then
    redis.call('SET', key .. ':throttle_pause', tostring(now + delay), 'PX', math.ceil(1000 * delay) + 1000)
  end
  local h, w = limits(domain)
  if h <= 0 then return end
  redis.call('ZADD', key .. ':throttle_window', now, member)
  redis.call('PEXPIRE', key .. ':throttle_window', math.ceil(2000 * w))
  if moderated and h > 1 then
    local interval = w / h
    local slot = tonumber(redis.call('GET', key .. ':throttle_time') or '0')
    local next_slot = now
    if now - slot < 2 * interval then next_slot = slot + interval end
    redis.call('SET', key .. ':throttle_time', tostring(next_slot), 'PX', math.ceil(2000 * w))
  end
end

local function best_ready()
  local best_d, best_m, best_s
  local cands = redis.call('ZRANGE', heads, 0, scan - 1, 'WITHSCORES')
  for j = 1, #cands, 2 do
    local d, hs = cands[j], tonumber(cands[j + 1])
    if best_s and hs > best_s then break end
    if allowed[d] == nil then allowed[d] = (not blacklist[d]) and throttle_allows(d) end
    if allowed[d] then
      local head = redis.call('ZRANGE', sid .. ':' .. d .. ':queue', 0, 0, 'WITHSCORES')
      if #head == 0 then
        redis.call('ZREM', heads, d)
      else
        local s = tonumber(head[2])
        if s ~= hs then redis.call('ZADD', heads, s, d) end
        if (not best_s) or s < best_s or (s == best_s and head[1] < best_m) then
          best_d, best_m, best_s = d, head[1], s
        end
      end
    end
  end
  return best_d, best_m
end

-- The crawl a queue member belongs to: its code (after the 16-digit id) names it.
local names = {}
local function crawl_of(m)
  local code = string.sub(m, 17)
  local name = names[code]
  if name == nil then
    name = redis.call('HGET', sid .. ':crawl_names', code) or false
    names[code] = name
  end
  if not name then return nil, nil end
  local tab = string.find(name, '\t', 1, true)
  return name, sid .. ':crawl:' .. string.sub(name, 1, tab - 1) .. ':' .. string.sub(name, tab + 1)
end

local function count(crawl, field, n)
  redis.call('HINCRBY', crawl .. ':progress', field, n)
end

local function lease_one(d, m)
  local queue = sid .. ':' .. d .. ':queue'
  redis.call('ZREM', queue, m)
  local nh = redis.call('ZRANGE', queue, 0, 0, 'WITHSCORES')
  if #nh == 0 then redis.call('ZREM', heads, d) else redis.call('ZADD', heads, nh[2], d) end
  spend_hit(d, m)
  allowed[d] = nil
  redis.call('ZADD', inflight, now + lease, d .. '\t' .. m)
  local name, crawl = crawl_of(m)
  if not name then return '', '' end
  count(crawl, 'queued', -1)
  count(crawl, 'inflight', 1)
  redis.call('EXPIRE', crawl .. ':progress', state_ttl)
  return redis.call('HGET', crawl .. ':requests', string.sub(m, 1, 16) .. d) or '', name
end

-- Due retries go back into their queues, scored by their (lowered) priority; the earliest one
-- still waiting tells an idle spider when to ask again.
local function promote_due()
  local delayed = sid .. ':delayed'
  local due = redis.call('ZRANGEBYSCORE', delayed, '-inf', now, 'LIMIT', 0, promote_max)
  for _, entry in ipairs(due) do
    redis.call('ZREM', delayed, entry)
    local tab = string.find(entry, '\t', 1, true)
    local d, m = string.sub(entry, 1, tab - 1), string.sub(entry, tab + 1)
    local name, crawl = crawl_of(m)
    local payload = name and redis.call('HGET', crawl .. ':requests', string.sub(m, 1, 16) .. d)
    if payload then
      local ok, req = pcall(cjson.decode, payload)
      local score = -((ok and tonumber(req.priority)) or 1)
      redis.call('ZADD', sid .. ':' .. d .. ':queue', score, m)
      redis.call('ZADD', heads, 'LT', score, d)
      count(crawl, 'retrying', -1)
      count(crawl, 'queued', 1)
      redis.call('EXPIRE', crawl .. ':progress', state_ttl)
    end
  end
  local waiting = redis.call('ZRANGE', delayed, 0, 0, 'WITHSCORES')
  if #waiting > 0 then note_ready(tonumber(waiting[2])) end
end

promote_due()
local out = {0, 0, ''}
for _ = 1, max_items do
  local d, m = best_ready()
  if not d then break end
  local payload, name = lease_one(d, m)
  out[#out + 1] = d
  out[#out + 1] = m
  out[#out + 1] = payload
  out[#out + 1] = name
end
if next_ready >= 0 then out[1] = math.max(0, math.ceil((next_ready - now) * 1000)) else out[1] = -1 end
out[2] = denied
local best = redis.call('ZRANGE', heads, 0, 0, 'WITHSCORES')
if #best > 0 then out[3] = best[2] end
return out
