-- pop.lua: lease the highest-priority requests among the domains whose throttle allows one now.
--
-- KEYS[1]: a key of the frontier shard, for routing only. On a Redis Cluster the spiderid arrives
--         prefixed with its shard's hash tag (utils/frontier/shards.py), so every key lives in one slot.
-- ARGV[1] spiderid             ARGV[2] most requests to hand out
-- ARGV[3] lease seconds        ARGV[4] most domains one call wakes, snoozes or repairs besides its leases
-- ARGV[5] throttle key prefix ('', '<spider>:', '<ip>:' or '<spider>:<ip>:')
-- ARGV[6] default hits (<= 0 = unthrottled)   ARGV[7] default window (s)
-- ARGV[8] moderated ('1' = spread hits evenly over the window)
-- ARGV[9] JSON {domain: [hits, window]} overrides   ARGV[10] JSON [blacklisted domains]
-- ARGV[11] crawl state idle TTL (s)   ARGV[12] most due retries to move back into queues per call
-- Returns a flat array: the milliseconds until this shard may next hand out something (0 = now,
-- -1 = nothing queued or waiting), how many domains this call snoozed on their throttle, the best
-- score among the ready domains ('' = none), then domain, queue member, payload and crawl
-- (`<appid>\t<crawlid>`, '' if unknown) for each lease.
--
-- The cost does not grow with the number of domains (lib/domain_sets.lua): domains wait in
-- <sid>:snoozed ordered by the time their throttle next allows them and only the due ones move to
-- <sid>:ready, where the best score wins and ties go to the oldest request. A domain is examined
-- only when it is due, so one lease costs O(log N) whatever N. A throttle hit is spent only for a
-- request handed out. A throttle key T is also held back by `T:throttle_pause` (a not-before time:
-- Retry-After answers, robots.txt Crawl-delay) and `T:throttle_delay` (seconds between two hits, from
-- Crawl-delay), which apply even when the domain is otherwise unthrottled.
-- Each leased request moves into <sid>:inflight scored by its lease deadline. Requests waiting to
-- retry (<sid>:delayed, scored by their not-before time) go back into their queue first, once due.

--! include domain_sets

local sid, max_items, lease = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local budget, prefix = tonumber(ARGV[4]), ARGV[5]
local hits, window, moderated = tonumber(ARGV[6]), tonumber(ARGV[7]), ARGV[8] == '1'
local overrides = cjson.decode(ARGV[9])
local blacklist = {}
for _, d in ipairs(cjson.decode(ARGV[10])) do blacklist[d] = true end
local state_ttl, promote_max = tonumber(ARGV[11]), tonumber(ARGV[12] or '100')
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local heads, inflight = sid .. ':heads', sid .. ':inflight'
local ready, snoozed = sid .. ':ready', sid .. ':snoozed'
local BLACKLIST_RECHECK = 5  -- seconds a blacklisted domain sleeps before it is looked at again
local SLACK = 0.05  -- share of an interval a late moderated slot may catch up (gap >= 0.95 interval)
local denied = 0  -- domains this call snoozed on their throttle (a metric)

local function limits(domain)
  local o = overrides[domain]
  if o then return tonumber(o[1]), tonumber(o[2]) end
  return hits, window
end

-- The domain's throttle as read now: when it next allows a hit (>= now), and what spend_hit needs.
local function throttle_state(domain)
  local key = prefix .. domain
  local st = {key = key, at = now, n = 0, slot = 0}
  local pause = tonumber(redis.call('GET', key .. ':throttle_pause') or '0')
  if pause > now then st.at = pause end
  st.h, st.w = limits(domain)
  if st.h <= 0 then return st end
  local win = key .. ':throttle_window'
  redis.call('ZREMRANGEBYSCORE', win, '-inf', now - st.w)
  st.n = redis.call('ZCARD', win)
  if st.n >= st.h then  -- full: the hit that must leave the window first
    local leaving = redis.call('ZRANGE', win, st.n - st.h, st.n - st.h, 'WITHSCORES')
    st.at = math.max(st.at, tonumber(leaving[2]) + st.w)
  end
  if moderated and st.h > 1 then
    st.slot = tonumber(redis.call('GET', key .. ':throttle_time') or '0')
    st.at = math.max(st.at, st.slot + st.w / st.h)
  end
  return st
end

-- Spend one hit; returns when the throttle next allows one. The moderated slot advances by one
-- interval while the domain keeps up, so late polls do not drift the rate below hits/window; it
-- never falls more than SLACK of an interval behind now, so two hits are never closer than
-- (1 - SLACK) intervals, and after an idle spell it restarts.
local function spend_hit(st, member)
  local key, at = st.key, now
  local delay = tonumber(redis.call('GET', key .. ':throttle_delay') or '0')
  if delay > 0 then
    at = now + delay
    redis.call('SET', key .. ':throttle_pause', tostring(at), 'PX', math.ceil(1000 * delay) + 1000)
  end
  local h, w = st.h, st.w
  if h <= 0 then return at end
  local win = key .. ':throttle_window'
  redis.call('ZADD', win, now, member)
  redis.call('PEXPIRE', win, math.ceil(2000 * w))
  if st.n + 1 >= h then
    local leaving = redis.call('ZRANGE', win, st.n + 1 - h, st.n + 1 - h, 'WITHSCORES')
    at = math.max(at, tonumber(leaving[2]) + w)
  end
  if moderated and h > 1 then
    local interval = w / h
    local next_slot = math.max(st.slot + interval, now - SLACK * interval)
    redis.call('SET', key .. ':throttle_time', tostring(next_slot), 'PX', math.ceil(2000 * w))
    at = math.max(at, next_slot + interval)
  end
  return at
end

local function snooze(domain, at)
  ds_leave(sid, domain)
  redis.call('ZADD', snoozed, at, domain)
end

-- Domains whose throttle override changed since the last call are looked at again now, so a
-- ZooKeeper change of a domain's interval applies at once (others: at their next due time).
local function apply_override_changes()
  local last = redis.call('HGET', sid .. ':policy', 'overrides')
  if last == ARGV[9] then return end
  redis.call('HSET', sid .. ':policy', 'overrides', ARGV[9])
  local old = last and cjson.decode(last) or {}
  local changed = {}
  for d, o in pairs(overrides) do
    local p = old[d]
    if not p or tonumber(p[1]) ~= tonumber(o[1]) or tonumber(p[2]) ~= tonumber(o[2]) then changed[d] = true end
  end
  for d in pairs(old) do if not overrides[d] then changed[d] = true end end
  for d in pairs(changed) do redis.call('ZADD', snoozed, 'XX', now, d) end
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

-- Progress counters of this call, written once per crawl and field at the end.
local counts = {}
local function count(crawl, field, n)
  local c = counts[crawl]
  if not c then c = {}; counts[crawl] = c end
  c[field] = (c[field] or 0) + n
end

-- Due retries go back into their queues, scored by their (lowered) priority.
local function promote_due()
  local delayed = sid .. ':delayed'
  local due = redis.call('ZRANGEBYSCORE', delayed, '-inf', now, 'LIMIT', 0, promote_max)
  local touched = {}
  for _, entry in ipairs(due) do
    redis.call('ZREM', delayed, entry)
    local tab = string.find(entry, '\t', 1, true)
    local d, m = string.sub(entry, 1, tab - 1), string.sub(entry, tab + 1)
    local name, crawl = crawl_of(m)
    local payload = name and redis.call('HGET', crawl .. ':requests', string.sub(m, 1, 16) .. d)
    if payload then
      local ok, req = pcall(cjson.decode, payload)
      local score = -((ok and type(req) == 'table' and tonumber(req.priority)) or 1)
      touched[d] = true
      redis.call('ZADD', sid .. ':' .. d .. ':queue', score, m)
      count(crawl, 'retrying', -1)
      count(crawl, 'queued', 1)
    end
  end
  for d in pairs(touched) do ds_place(sid, d, now) end
end

-- Snoozed domains whose time has come compete again, in line from the time they became due
-- (one read of each queue's head; the sets are written with one command each).
local function wake()
  -- When more domains are due than the spiders fetch (overload), they enter the competition in
  -- due-time order, a few times a batch per call, rather than all at once: waking is cheap per
  -- domain but not free. unpack() below takes at most ~8,000 values.
  local most = math.min(budget, 2000, math.max(16, 4 * max_items))
  local due = redis.call('ZRANGEBYSCORE', snoozed, '-inf', now, 'WITHSCORES', 'LIMIT', 0, most)
  if #due == 0 then return end
  local members, owners, gone = {}, {}, {}
  for i = 1, #due, 2 do
    local d = due[i]
    local h = redis.call('ZRANGE', sid .. ':' .. d .. ':queue', 0, 0, 'WITHSCORES')
    if #h == 0 then
      gone[#gone + 1] = d
    else
      local m = ds_stamp(tonumber(due[i + 1])) .. d
      members[#members + 1] = h[2]
      members[#members + 1] = m
      owners[#owners + 1] = d
      owners[#owners + 1] = m
    end
  end
  if #due / 2 < most then
    redis.call('ZREMRANGEBYSCORE', snoozed, '-inf', now)
  else
    for i = 1, #due, 2 do redis.call('ZREM', snoozed, due[i]) end
  end
  if #members > 0 then
    redis.call('ZADD', ready, unpack(members))
    redis.call('HSET', sid .. ':ready_of', unpack(owners))
  end
  if #gone > 0 then redis.call('ZREM', heads, unpack(gone)) end
end

-- Self-repair: domains with queued requests in neither set (written by an older Shoal, or left by
-- a failed call) are found a few per call, from a cursor over <sid>:heads.
local function adopt(spent)
  local n = redis.call('ZCARD', heads)
  if n <= redis.call('ZCARD', ready) + redis.call('ZCARD', snoozed) then return end
  local cursor = tonumber(redis.call('HGET', sid .. ':policy', 'adopt') or '0')
  if cursor >= n then cursor = 0 end
  local take = math.max(1, budget - spent)
  for _, d in ipairs(redis.call('ZRANGE', heads, cursor, cursor + take - 1)) do
    if not redis.call('ZSCORE', snoozed, d) and redis.call('HEXISTS', sid .. ':ready_of', d) == 0 then
      ds_place(sid, d, now)
    end
  end
  redis.call('HSET', sid .. ':policy', 'adopt', tostring(cursor + take))
end

-- Lease the domain's best request; the domain then waits for its throttle, or goes to the back
-- of the ready line.
local function lease_one(d, rm, qm, score, st)
  local queue = sid .. ':' .. d .. ':queue'
  redis.call('ZREM', queue, qm)
  redis.call('ZREM', ready, rm)
  local at = spend_hit(st, qm)
  local h = redis.call('ZRANGE', queue, 0, 0, 'WITHSCORES')
  if #h == 0 then
    redis.call('HDEL', sid .. ':ready_of', d)
    redis.call('ZREM', heads, d)
  else
    if tonumber(h[2]) ~= score then redis.call('ZADD', heads, h[2], d) end
    if at > now then
      redis.call('HDEL', sid .. ':ready_of', d)
      redis.call('ZADD', snoozed, at, d)
      denied = denied + 1
    else
      ds_enter(sid, d, tonumber(h[2]), now)
    end
  end
  redis.call('ZADD', inflight, now + lease, d .. '\t' .. qm)
  local name, crawl = crawl_of(qm)
  if not name then return '', '' end
  count(crawl, 'queued', -1)
  count(crawl, 'inflight', 1)
  return redis.call('HGET', crawl .. ':requests', string.sub(qm, 1, 16) .. d) or '', name
end

apply_override_changes()
promote_due()
wake()
adopt(0)
local out = {0, 0, ''}
local leased, work = 0, 0
while leased < max_items and work < budget do
  local best = redis.call('ZRANGE', ready, 0, 0, 'WITHSCORES')
  if #best == 0 then break end
  local d = string.sub(best[1], 14)
  local head = redis.call('ZRANGE', sid .. ':' .. d .. ':queue', 0, 0, 'WITHSCORES')
  if #head == 0 or tonumber(head[2]) ~= tonumber(best[2])
     or redis.call('HGET', sid .. ':ready_of', d) ~= best[1] then
    redis.call('ZREM', ready, best[1])  -- a stale entry: the domain goes where its queue says
    if redis.call('HGET', sid .. ':ready_of', d) == best[1] then redis.call('HDEL', sid .. ':ready_of', d) end
    ds_place(sid, d, now)
    work = work + 1
  elseif blacklist[d] then
    snooze(d, now + BLACKLIST_RECHECK)
    work = work + 1
  else
    local st = throttle_state(d)
    if st.at > now then
      snooze(d, st.at)
      denied = denied + 1
      work = work + 1
    else
      local payload, name = lease_one(d, best[1], head[1], tonumber(head[2]), st)
      leased = leased + 1
      out[#out + 1] = d
      out[#out + 1] = head[1]
      out[#out + 1] = payload
      out[#out + 1] = name
    end
  end
end

for crawl, fields in pairs(counts) do
  for field, n in pairs(fields) do redis.call('HINCRBY', crawl .. ':progress', field, n) end
  redis.call('EXPIRE', crawl .. ':progress', state_ttl)
end

local best = redis.call('ZRANGE', ready, 0, 0, 'WITHSCORES')
local next_at = -1
if #best > 0 then
  out[3] = best[2]
  next_at = now
else
  for _, key in ipairs({snoozed, sid .. ':delayed'}) do
    local first = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')
    if #first > 0 and (next_at < 0 or tonumber(first[2]) < next_at) then next_at = tonumber(first[2]) end
  end
end
if next_at >= 0 then out[1] = math.max(0, math.ceil((next_at - now) * 1000)) else out[1] = -1 end
out[2] = denied
return out
