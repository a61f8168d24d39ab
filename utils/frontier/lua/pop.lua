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
-- request handed out. A throttle key's state is one hash (lib/throttle_state.lua): its hits in the
-- window, its moderated slot, and a pause (Retry-After, Crawl-delay) and a delay (Crawl-delay) that
-- apply even when the domain is otherwise unthrottled.
-- A lease costs about five commands: the ready line is taken a batch at a time (ZPOPMIN) and its
-- owners read at once; the domain's queue head and next head come with one read; the throttle is
-- one read and one write. What the call changes in <sid>:ready_of, <sid>:snoozed and
-- <sid>:inflight, and the payloads it reads, go in one command each at the end (or before a rare
-- path reads them back).
-- Each leased request moves into <sid>:inflight scored by its lease deadline. Requests waiting to
-- retry (<sid>:delayed, scored by their not-before time) go back into their queue first, once due.

--! include domain_sets
--! include throttle_state

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
local ready, snoozed, ready_of = sid .. ':ready', sid .. ':snoozed', sid .. ':ready_of'
local BLACKLIST_RECHECK = 5  -- seconds a blacklisted domain sleeps before it is looked at again
local SLACK = 0.05  -- share of an interval a late moderated slot may catch up (gap >= 0.95 interval)
local CHUNK = 4000  -- most values one command takes from unpack() (Lua's C stack holds ~8,000)
local denied = 0  -- domains this call snoozed on their throttle (a metric)

-- One command per CHUNK values of `flat` (CHUNK is even: pairs stay whole).
local function bulk(command, key, flat)
  for i = 1, #flat, CHUNK do
    redis.call(command, key, unpack(flat, i, math.min(i + CHUNK - 1, #flat)))
  end
end

local function limits(domain)
  local o = overrides[domain]
  if o then return tonumber(o[1]), tonumber(o[2]) end
  return hits, window
end

-- The domain's throttle as read now: when it next allows a hit (>= now), and what spend_hit needs.
local function throttle_state(domain)
  local key = prefix .. domain .. ':throttle'
  local f = redis.call('HMGET', key, 'hits', 'slot', 'pause', 'delay', 'delay_until', 'exp')
  local st = {key = key, at = now, hits = f[1] or '', slot = tonumber(f[2]) or 0, exp = tonumber(f[6]) or 0}
  local pause = tonumber(f[3]) or 0
  if pause > now then st.at = pause end
  st.delay = ((tonumber(f[5]) or 0) > now and tonumber(f[4])) or 0
  st.h, st.w = limits(domain)
  if st.h <= 0 then return st end
  st.gone = th_count_until(st.hits, now - st.w)  -- hits that left the window
  st.n = #st.hits / TH_WIDTH - st.gone
  if st.n >= st.h then  -- full: the hit that must leave the window first
    st.at = math.max(st.at, th_hit(st.hits, st.gone + st.n - st.h) + st.w)
  end
  if moderated and st.h > 1 then st.at = math.max(st.at, st.slot + st.w / st.h) end
  return st
end

-- Spend one hit; returns when the throttle next allows one. The moderated slot advances by one
-- interval while the domain keeps up, so late polls do not drift the rate below hits/window; it
-- never falls more than SLACK of an interval behind now, so two hits are never closer than
-- (1 - SLACK) intervals, and after an idle spell it restarts.
local function spend_hit(st)
  local at, fields = now, {}
  local need = now  -- the hash must live at least until then
  if st.delay > 0 then
    at = now + st.delay
    fields.pause = th_stamp(at)
    need = at
  end
  local h, w = st.h, st.w
  if h > 0 then
    local kept = string.sub(st.hits, st.gone * TH_WIDTH + 1) .. th_stamp(now)
    local count = st.n + 1
    if count > h then
      kept = string.sub(kept, (count - h) * TH_WIDTH + 1)
      count = h
    end
    fields.hits = kept
    if count >= h then at = math.max(at, th_hit(kept, 0) + w) end
    if moderated and h > 1 then
      local interval = w / h
      local next_slot = math.max(st.slot + interval, now - SLACK * interval)
      fields.slot = th_stamp(next_slot)
      at = math.max(at, next_slot + interval)
    end
    need = math.max(need, now + w)
  end
  if next(fields) == nil then return at end  -- unthrottled, no Crawl-delay: nothing to remember
  th_write(st.key, fields, need, st.exp, h > 0 and now + 2 * w or nil)  -- two windows at a time
  return at
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

-- Snoozed domains whose time has come compete again, in line from the time they became due, at
-- their best queue score as <sid>:heads has it (a stale one is mended when the domain is leased).
local function wake()
  -- When more domains are due than the spiders fetch (overload), they enter the competition in
  -- due-time order rather than all at once: a few times a batch per call while the ready line is
  -- short, one batch per call once it holds a few batches (as many as the call leases), so
  -- waking, cheap per domain but not free, is not spent on domains that would only wait in line.
  local most = math.min(budget, 2000, math.max(16, 4 * max_items))
  if redis.call('ZCARD', ready) >= most then most = math.max(1, math.min(most, max_items)) end
  local due = redis.call('ZRANGEBYSCORE', snoozed, '-inf', now, 'WITHSCORES', 'LIMIT', 0, most)
  if #due == 0 then return end
  local domains = {}
  for i = 1, #due, 2 do domains[#domains + 1] = due[i] end
  local scores = redis.call('ZMSCORE', heads, unpack(domains))
  local members, owners = {}, {}
  for j, d in ipairs(domains) do
    if scores[j] then  -- else the domain has nothing queued: it only leaves <sid>:snoozed
      local m = ds_stamp(tonumber(due[2 * j])) .. d
      members[#members + 1] = scores[j]
      members[#members + 1] = m
      owners[#owners + 1] = d
      owners[#owners + 1] = m
    end
  end
  redis.call('ZREMRANGEBYRANK', snoozed, 0, #domains - 1)  -- the due domains read above are its first
  if #members > 0 then
    bulk('ZADD', ready, members)
    bulk('HSET', ready_of, owners)
  end
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
    if not redis.call('ZSCORE', snoozed, d) and redis.call('HEXISTS', ready_of, d) == 0 then
      ds_place(sid, d, now)
    end
  end
  redis.call('HSET', sid .. ':policy', 'adopt', tostring(cursor + take))
end

-- What the lease loop changed, written once: each domain's ready member (false = none) and the
-- domains snoozed until a time. `owner` is what the loop knows of <sid>:ready_of.
local owner, owner_changed, snooze_until = {}, {}, {}
local function set_owner(d, m)
  owner[d] = m
  owner_changed[d] = true
end
local function snooze(d, at)
  set_owner(d, false)
  snooze_until[d] = at
end
local function flush()
  local set, del, sleep = {}, {}, {}
  for d in pairs(owner_changed) do
    if owner[d] then
      set[#set + 1] = d
      set[#set + 1] = owner[d]
    else
      del[#del + 1] = d
    end
  end
  for d, at in pairs(snooze_until) do
    sleep[#sleep + 1] = at
    sleep[#sleep + 1] = d
  end
  bulk('HSET', ready_of, set)
  bulk('HDEL', ready_of, del)
  bulk('ZADD', snoozed, sleep)
  owner_changed, snooze_until = {}, {}
end

-- A ready entry that does not match its domain's queue: the domain goes where its queue says.
local function mend(d)
  flush()
  ds_place(sid, d, now)
  owner[d] = redis.call('HGET', ready_of, d) or false
end

local out = {0, 0, ''}
local leased, work = 0, 0
local entries = {}  -- <sid>:inflight entries of this call's leases (score, member, ...)
local payloads = {}  -- crawl -> {fields = {...}, slots = {out positions}}

-- Lease the domain's best request (`head`: its queue's first two members with their scores); the
-- domain then waits for its throttle, or goes to the back of the ready line. Returns the score it
-- re-entered the ready line at, if it did.
local function lease_one(d, head, score, st)
  local qm = head[1]
  redis.call('ZREM', sid .. ':' .. d .. ':queue', qm)
  local at = spend_hit(st)
  local again = nil
  if #head < 4 then  -- the queue is empty now
    set_owner(d, false)
    redis.call('ZREM', heads, d)
  else
    local next_score = tonumber(head[4])
    if next_score ~= score then redis.call('ZADD', heads, next_score, d) end
    if at > now then
      snooze(d, at)
      denied = denied + 1
    else
      local m = ds_stamp(now) .. d
      redis.call('ZADD', ready, next_score, m)
      set_owner(d, m)
      again = next_score
    end
  end
  entries[#entries + 1] = now + lease
  entries[#entries + 1] = d .. '\t' .. qm
  local name, crawl = crawl_of(qm)
  out[#out + 1] = d
  out[#out + 1] = qm
  out[#out + 1] = ''
  out[#out + 1] = name or ''
  if name then
    count(crawl, 'queued', -1)
    count(crawl, 'inflight', 1)
    local p = payloads[crawl]
    if not p then p = {fields = {}, slots = {}}; payloads[crawl] = p end
    p.fields[#p.fields + 1] = string.sub(qm, 1, 16) .. d
    p.slots[#p.slots + 1] = #out - 1
  end
  return again
end

-- Look at one entry taken from the ready line (`rm` scored `score`): lease, snooze or mend.
local function examine(d, rm, score)
  if owner[d] ~= rm then  -- a stale entry
    mend(d)
    work = work + 1
  elseif blacklist[d] then
    snooze(d, now + BLACKLIST_RECHECK)
    work = work + 1
  else
    local head = redis.call('ZRANGE', sid .. ':' .. d .. ':queue', 0, 1, 'WITHSCORES')
    if #head == 0 or tonumber(head[2]) ~= score then
      set_owner(d, false)
      mend(d)
      work = work + 1
    else
      local st = throttle_state(d)
      if st.at > now then
        snooze(d, st.at)
        denied = denied + 1
        work = work + 1
      else
        leased = leased + 1
        return lease_one(d, head, score, st)
      end
    end
  end
  return nil
end

apply_override_changes()
promote_due()
wake()
adopt(0)
while leased < max_items and work < budget do
  flush()
  local taken = redis.call('ZPOPMIN', ready, math.min(max_items - leased, budget - work))
  if #taken == 0 then break end
  local domains = {}
  for i = 1, #taken, 2 do domains[#domains + 1] = string.sub(taken[i], 14) end
  local owners = redis.call('HMGET', ready_of, unpack(domains))
  for j, d in ipairs(domains) do owner[d] = owners[j] or false end
  for j, d in ipairs(domains) do
    local again = examine(d, taken[2 * j - 1], tonumber(taken[2 * j]))
    -- A domain back in line ahead of the entries still taken: they go back, in their places.
    if again and j < #domains and again < tonumber(taken[2 * j + 2]) then
      local back = {}
      for k = 2 * j + 1, #taken, 2 do
        back[#back + 1] = taken[k + 1]
        back[#back + 1] = taken[k]
      end
      bulk('ZADD', ready, back)
      break
    end
  end
end
flush()
bulk('ZADD', inflight, entries)
for crawl, p in pairs(payloads) do
  local values = redis.call('HMGET', crawl .. ':requests', unpack(p.fields))
  for k, slot in ipairs(p.slots) do out[slot] = values[k] or '' end
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
