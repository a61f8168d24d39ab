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
-- The cost does not grow with the number of domains (lib/domain_sets.lua): every domain with work
-- waits in <sid>:line, within its priority class ordered by the time its throttle next allows it,
-- and only classes whose first domain is due are looked at (<sid>:classes_ready). The best such
-- class gives its due domains in the order they fell due, a batch at a time, so a domain is
-- examined only when it is due and one lease costs O(log N) whatever N. A leased domain goes back
-- into its class's line at the time its throttle next allows it (now when unthrottled): a
-- throttled lease moves the same entries as an unthrottled one. A throttle hit is spent only for
-- a request handed out. A throttle key's state (lib/throttle_state.lua) holds its latest hits,
-- its moderated slot, and a pause (Retry-After, Crawl-delay) and a delay (Crawl-delay) that apply
-- even when the domain is otherwise unthrottled. Under the spider's own prefix `<sid>:` (the
-- default keys) a domain in the line carries it in its <sid>:line_of value, so the throttle costs
-- a lease no command of its own; under a shared prefix it is a field of `<prefix>throttles`.
-- A lease costs two commands of its own: the domain's queue head and next head come with one
-- read, and the request leaves its queue with one. The call's changes to <sid>:line,
-- <sid>:line_of and <sid>:inflight, the payloads it reads, and a shared prefix's throttle states
-- go in one command each per batch.
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
local line, line_of = sid .. ':line', sid .. ':line_of'
local classes_ready, classes_snoozed = sid .. ':classes_ready', sid .. ':classes_snoozed'
local BLACKLIST_RECHECK = 5  -- seconds a blacklisted domain sleeps before it is looked at again
local SLACK = 0.05  -- share of an interval a late moderated slot may catch up (gap >= 0.95 interval)
local CHUNK = 4000  -- most values one command takes from unpack() (Lua's C stack holds ~8,000)
local CLASS_WALK = 1  -- seconds between two steps of the class listing's self-repair
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

-- The throttle states of this call's domains (lib/throttle_state.lua): read a batch at a time,
-- written once per batch. Under the spider's own prefix (`own`) a domain in the line carries its
-- state in its line_of value (lib/domain_sets.lua): `carry` (domain -> state) goes out with the
-- batch's line_of write. The hash gets the others (th_out: domain, state, ...; th_need: the
-- latest `exp` among them).
local throttles = th_hash(prefix)
local own = prefix == sid .. ':'
local throttles_exp, th_out, th_need, carry = nil, {}, 0, {}  -- throttles_exp: nil = not read yet
local now_hit = th_time(now)  -- a hit now, as stored

-- The domain's throttle as read now (`state`: its packed state, '' = none): when it next allows
-- a hit (>= now), and what spend_hit needs.
local function throttle_state(domain, state)
  local exp, slot, pause, delay_until, delay, hits = th_unpack(state)
  local h, w = limits(domain)
  local st = {domain = domain, at = math.max(now, pause), exp = exp, slot = slot, pause = pause,
              delay_until = delay_until, delay = delay_until > now and delay or 0, hits = hits,
              h = h, w = w, n = #hits / TH_WIDTH}
  if h <= 0 then return st end
  if st.n >= st.h then  -- the window is full while the h-th latest hit is inside it
    st.at = math.max(st.at, th_hit(st.hits, st.n - st.h) + st.w)
  end
  if moderated and st.h > 1 then st.at = math.max(st.at, st.slot + st.w / st.h) end
  return st
end

-- Keep the domain's new state (kept until `exp`): carried in the line while it stays there.
local function keep_state(d, state, exp, in_line)
  if own and in_line then
    carry[d] = state
    return
  end
  local k = #th_out
  th_out[k + 1] = d
  th_out[k + 2] = state
  if exp > th_need then th_need = exp end
end

-- Spend one hit; returns when the throttle next allows one, and the new state with its `exp`
-- (nil when there is nothing to remember). The moderated slot advances by one
-- interval while the domain keeps up, so late polls do not drift the rate below hits/window; it
-- never falls more than SLACK of an interval behind now, so two hits are never closer than
-- (1 - SLACK) intervals, and after an idle spell it restarts.
local function spend_hit(st)
  local h, w, n, at, need = st.h, st.w, st.n, now, now  -- need: the state must be kept until then
  local pause, slot, hits, delay = st.pause, st.slot, st.hits, st.delay
  if delay > 0 then
    at = now + delay
    pause, need = at, at
  elseif h <= 0 then
    return at, nil, 0  -- unthrottled, no Crawl-delay: nothing to remember
  end
  if h > 0 then
    if n >= h then
      hits = string.sub(hits, (n + 1 - h) * TH_WIDTH + 1) .. now_hit  -- the oldest hits leave
    else
      hits = hits .. now_hit
    end
    if n + 1 >= h then  -- full: until the oldest kept hit leaves the window
      local free = th_hit(hits, 0) + w
      if free > at then at = free end
    end
    if moderated and h > 1 then
      local interval = w / h
      slot = slot + interval
      if slot < now - SLACK * interval then slot = now - SLACK * interval end
      if slot + interval > at then at = slot + interval end
    end
    if now + w > need then need = now + w end
  end
  local exp = st.exp
  if need > exp then exp = need + (h > 0 and w or 0) end  -- a window ahead: swept after that
  return at, th_pack(exp, slot, pause, st.delay_until, delay, hits), exp
end

local function flush_throttles()
  if #th_out == 0 then return end
  if not throttles_exp then throttles_exp = th_hash_exp(redis.call('HGET', throttles, '')) end
  throttles_exp = th_write(throttles, th_out, throttles_exp, th_need, th_need + 2 * window + 60)
  th_out, th_need = {}, 0
end

-- Domains whose throttle override changed since the last call are looked at again now, so a
-- ZooKeeper change of a domain's interval applies at once (others: at their next due time).
local function apply_override_changes(last)
  if last == ARGV[9] then return end
  redis.call('HSET', sid .. ':policy', 'overrides', ARGV[9])
  local old = last and cjson.decode(last) or {}
  local changed = {}
  for d, o in pairs(overrides) do
    local p = old[d]
    if not p or tonumber(p[1]) ~= tonumber(o[1]) or tonumber(p[2]) ~= tonumber(o[2]) then changed[d] = true end
  end
  for d in pairs(old) do if not overrides[d] then changed[d] = true end end
  for d in pairs(changed) do
    local v = redis.call('HGET', line_of, d)
    local m = v and ds_member(v, d)
    local score = m and ds_due(m) > now and redis.call('ZSCORE', line, m)
    if score then
      redis.call('ZREM', line, m)
      ds_enter(sid, d, tonumber(score), now, now, ds_carried(v, d))
    end
  end
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

-- Classes whose first domain has fallen due are ready again.
local function wake_classes()
  local due = redis.call('ZRANGEBYSCORE', classes_snoozed, '-inf', now, 'LIMIT', 0, budget)
  if #due == 0 then return end
  local members = {}
  for _, c in ipairs(due) do
    members[#members + 1] = c
    members[#members + 1] = c
  end
  bulk('ZADD', classes_ready, members)
  bulk('ZREM', classes_snoozed, due)
end

-- Where the class named `c` (score `score`) belongs now: ready when its first domain is due,
-- snoozed until that domain is due, or nowhere when it has no domain left.
local function relist_class(c, score)
  local first = redis.call('ZRANGEBYSCORE', line, score, score, 'LIMIT', 0, 1)
  if #first == 0 then
    redis.call('ZREM', classes_ready, c)
    redis.call('ZREM', classes_snoozed, c)
  elseif ds_due(first[1]) <= now then
    redis.call('ZADD', classes_ready, score, c)
    redis.call('ZREM', classes_snoozed, c)
  else
    redis.call('ZREM', classes_ready, c)
    redis.call('ZADD', classes_snoozed, ds_due(first[1]), c)
  end
end

-- Self-repair: domains with queued requests missing from the line (written by an older Shoal, or
-- left by a failed call) are found a few per call, from a cursor over <sid>:heads; and, one step
-- a second, a cursor walks the line's classes and lists any class neither set holds, and another
-- sweeps the throttle states past their time.
local function adopt(policy)
  local n = redis.call('ZCARD', heads)
  if n > redis.call('HLEN', line_of) then
    local cursor = tonumber(policy[2] or '0')
    if cursor >= n then cursor = 0 end
    for _, d in ipairs(redis.call('ZRANGE', heads, cursor, cursor + budget - 1)) do
      if redis.call('HEXISTS', line_of, d) == 0 then ds_place(sid, d, now) end
    end
    redis.call('HSET', sid .. ':policy', 'adopt', tostring(cursor + budget))
    redis.call('DEL', sid .. ':ready', sid .. ':ready_of', sid .. ':snoozed')  -- an older Shoal's sets
  end
  if tonumber(policy[3] or '0') > now then return end
  local after = (policy[4] and policy[4] ~= '-inf') and ('(' .. policy[4]) or '-inf'
  local nxt = redis.call('ZRANGEBYSCORE', line, after, '+inf', 'WITHSCORES', 'LIMIT', 0, 1)
  local walked = '-inf'
  if #nxt > 0 then
    local c = ds_class(tonumber(nxt[2]))
    if not redis.call('ZSCORE', classes_ready, c) and not redis.call('ZSCORE', classes_snoozed, c) then
      relist_class(c, tonumber(nxt[2]))
    end
    walked = nxt[2]
  end
  -- The throttle states past their time go, a thousandth of them (at least 100) a step: a pass
  -- over 100,000 domains takes under 17 minutes and costs the pops ~1% of their time.
  local count = math.max(100, math.floor(redis.call('HLEN', throttles) / 1000))
  local sweep = th_sweep(throttles, policy[5] or '0', count, now)
  redis.call('HSET', sid .. ':policy', 'class_walk_at', tostring(now + CLASS_WALK), 'class_walk', walked, 'sweep', sweep)
end

-- What the lease loop changed in the line, written once per batch: members leaving it, members
-- entering it (with their scores), each domain's member in <sid>:line_of (false = none), and the
-- classes to list again. `states` holds each examined domain's throttle state as read.
local states = {}
local leaving, entering, owner, owner_changed, classes_touched = {}, {}, {}, {}, {}
local function set_owner(d, m)
  owner[d] = m
  owner_changed[d] = true
end
-- The domain leaves the line entry `m` and goes back in at `score`, due at `at`.
local function requeue(d, m, score, at)
  local nm = ds_stamp(at) .. d
  leaving[#leaving + 1] = m
  entering[#entering + 1] = score
  entering[#entering + 1] = nm
  set_owner(d, nm)
  classes_touched[ds_class(score)] = score
end
local function flush()
  local set, del = {}, {}
  for d in pairs(owner_changed) do
    if owner[d] then
      set[#set + 1] = d
      set[#set + 1] = own and (owner[d] .. (carry[d] or states[d] or '')) or owner[d]
    else
      del[#del + 1] = d
    end
  end
  carry = {}
  bulk('ZREM', line, leaving)
  bulk('ZADD', line, entering)
  bulk('HSET', line_of, set)
  bulk('HDEL', line_of, del)
  flush_throttles()
  for c, score in pairs(classes_touched) do relist_class(c, score) end
  leaving, entering, owner_changed, classes_touched = {}, {}, {}, {}
end

-- A line entry that does not match its domain's queue: the domain goes where its queue says.
local function mend(d, m)
  leaving[#leaving + 1] = m
  flush()
  local v = redis.call('HGET', line_of, d)
  if v and ds_member(v, d) == m then ds_leave(sid, d) end
  ds_place(sid, d, now)
  v = redis.call('HGET', line_of, d)
  owner[d] = v and ds_member(v, d) or false
  states[d] = nil
end

local out = {0, 0, ''}
local leased, work = 0, 0
local entries = {}  -- <sid>:inflight entries of this call's leases (score, member, ...)
local payloads = {}  -- crawl -> {fields = {...}, slots = {out positions}}

-- Lease the domain's best request (`head`: its queue's first two members with their scores); the
-- domain then goes back into the line at the time its throttle next allows it. Returns true when
-- it is due now in a better class than `score` (the classes must be looked at again).
local function lease_one(d, m, head, score, st)
  local qm = head[1]
  redis.call('ZREM', sid .. ':' .. d .. ':queue', qm)
  local at, state, exp = spend_hit(st)
  local better = false
  if #head < 4 then  -- the queue is empty now
    leaving[#leaving + 1] = m
    set_owner(d, false)
    redis.call('ZREM', heads, d)
    local held = states[d] or ''
    if not state and own and held ~= '' then state, exp = held, th_exp(held) end  -- it keeps what it carried
    if state then keep_state(d, state, exp, false) end
  else
    if state then keep_state(d, state, exp, true) end
    local next_score = tonumber(head[4])
    if next_score ~= score then redis.call('ZADD', heads, next_score, d) end
    requeue(d, m, next_score, at)
    if at > now then denied = denied + 1 end
    better = at <= now and next_score < score
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
  return better
end

-- Look at one due line entry (`m`, class `score`): lease, put back until its throttle allows it,
-- or mend. Returns true when the classes must be looked at again.
local function examine(d, m, score)
  if owner[d] ~= m then  -- a stale entry
    mend(d, m)
    work = work + 1
    return true
  elseif blacklist[d] then
    requeue(d, m, score, now + BLACKLIST_RECHECK)
    work = work + 1
    return false
  end
  local head = redis.call('ZRANGE', sid .. ':' .. d .. ':queue', 0, 1, 'WITHSCORES')
  if #head == 0 or tonumber(head[2]) ~= score then
    mend(d, m)
    work = work + 1
    return true
  end
  local st = throttle_state(d, states[d] or '')
  if st.at > now then
    requeue(d, m, score, st.at)
    denied = denied + 1
    work = work + 1
    return false
  end
  leased = leased + 1
  return lease_one(d, m, head, score, st)
end

local policy = redis.call('HMGET', sid .. ':policy', 'overrides', 'adopt', 'class_walk_at', 'class_walk', 'sweep')
apply_override_changes(policy[1])
promote_due()
wake_classes()
adopt(policy)
while leased < max_items and work < budget do
  flush()
  local best = redis.call('ZRANGE', classes_ready, 0, 0, 'WITHSCORES')
  if #best == 0 then break end
  local c, score = best[1], tonumber(best[2])
  classes_touched[c] = score  -- listed again at the next flush, whatever this batch finds
  local due = redis.call('ZRANGEBYSCORE', line, score, score, 'LIMIT', 0, math.min(max_items - leased, budget - work))
  work = work + 1
  local domains = {}
  for j, m in ipairs(due) do
    if ds_due(m) > now then break end  -- the rest of the class is not due yet
    domains[j] = string.sub(m, 14)
  end
  if #domains > 0 then
    local owners = redis.call('HMGET', line_of, unpack(domains))
    local uncarried = {}  -- domains whose state is in the hash
    for j, d in ipairs(domains) do
      local v = owners[j]
      owner[d] = v and ds_member(v, d) or false
      local state = (own and v and #v > #owner[d]) and ds_carried(v, d) or ''
      states[d] = state
      if state == '' then uncarried[#uncarried + 1] = d end
    end
    if #uncarried > 0 then
      local raw = redis.call('HMGET', throttles, '', unpack(uncarried))
      throttles_exp = th_hash_exp(raw[1])
      for j, d in ipairs(uncarried) do states[d] = raw[j + 1] or '' end
    end
    for j, d in ipairs(domains) do
      if examine(d, due[j], score) then break end
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

local best = redis.call('ZRANGE', classes_ready, 0, 0, 'WITHSCORES')
local next_at = -1
if #best > 0 then
  out[3] = best[2]
  next_at = now
else
  for _, key in ipairs({classes_snoozed, sid .. ':delayed'}) do
    local first = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')
    if #first > 0 and (next_at < 0 or tonumber(first[2]) < next_at) then next_at = tonumber(first[2]) end
  end
end
if next_at >= 0 then out[1] = math.max(0, math.ceil((next_at - now) * 1000)) else out[1] = -1 end
out[2] = denied
return out
