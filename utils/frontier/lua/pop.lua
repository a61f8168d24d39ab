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
-- ARGV[13] the apps' lease-time quotas, this shard's part (lib/app_limits.lua; '' = none)
-- ARGV[14] the apps' weights, for sharing the leases between them (lib/app_limits.lua; '' = not shared)
-- ARGV[15] the apps' leases dealt to this call by its caller, JSON {appid: n} (Redis Cluster; '' = one shard)
-- Returns a flat array: the milliseconds until this shard may next hand out something (0 = now,
-- -1 = nothing queued or waiting), how many domains this call snoozed on their throttle, the best
-- score among the ready domains ('' = none), this shard's leases in flight per app after the call
-- (JSON, with ARGV[15] and the shares on; else ''), then domain, queue member, payload, crawl
-- (`<appid>\t<crawlid>`, '' if unknown), ladder level (<sid>:ladder_levels, 0 = none) and the JSON
-- of its crawl-level fields ('' = none; lib/stored.lua) for each lease.
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
-- <sid>:line_of and <sid>:inflight, and a shared prefix's throttle states go in one command each
-- per batch; the payloads it reads, in one per crawl and domain (lib/stored.lua).
-- Each leased request moves into <sid>:inflight scored by its lease deadline. Within a score the
-- queue's members sort by their crawl's virtual finish tag (lib/fair.lua, set at enqueue), so the
-- head is the fair choice between crawls at no cost here; a queue that empties drops that state.
--
-- With the apps' weights given (ARGV[14]), a due domain whose next request's app holds more than its
-- weight's share of this shard's leases in flight (on a cluster: whose app has no lease left in the
-- call's deal, ARGV[15]) is skipped (SKIP_MOST at most per class) until its class's other due domains
-- were looked at (lib/app_limits.lua): crawler slots go to the apps by weight when they are the
-- bottleneck, and every due domain is still leased when they are not. Strict priority holds: only
-- within a class.
--
-- Before the lease loop, four maintenance passes, each a lib with its contract at its top:
-- override changes (lib/overrides.lua), due retries back into their queues (lib/retries.lua),
-- classes waking (lib/classes.lua), self-repair incl. an older Shoal's keys (lib/repair.lua). The
-- throttle's arithmetic is lib/throttle_rules.lua; where a domain's state is, lib/domain_sets.lua.

--! include keys
--! include bulk
--! include domain_sets
--! include throttle_rules
--! include crawl_counts
--! include overrides
--! include retries
--! include classes
--! include repair
--! include wake
--! include stored
--! include tier
--! include app_limits

local sid, max_items, lease = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local budget, prefix = tonumber(ARGV[4]), ARGV[5]
local overrides = cjson.decode(ARGV[9])
local blacklist = {}
for _, d in ipairs(cjson.decode(ARGV[10])) do blacklist[d] = true end
local state_ttl, promote_max = tonumber(ARGV[11]), tonumber(ARGV[12] or '100')
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local rules = tr_rules(now, tonumber(ARGV[6]), tonumber(ARGV[7]), ARGV[8] == '1', overrides)
local al = al_new(sid, ARGV[13], now, ARGV[14], ARGV[15])  -- apps' lease-time quotas and shares; their leases counted
local line, line_of, heads = K.line(sid), K.line_of(sid), K.heads(sid)
local throttles = K.throttles(prefix)
local own = prefix == K.spider_throttle_prefix(sid)  -- the line carries the states (lib/domain_sets.lua)
local BLACKLIST_RECHECK = 5  -- seconds a blacklisted domain sleeps before it is looked at again
local HEAD, ROW = 4, 6  -- the reply's header values, and values per lease
local SKIP_MOST = 64  -- due domains a call skips at most for their app's share (then it leases them)

-- The call's state `b`, handed to every step below as an argument. What changes the line, written
-- once per batch by flush(b): members leaving it, members entering it (score, member, ...), each
-- domain's new member (`owner`, false = none; `changed` names the domains to write), the classes
-- to list again, the throttle states read (`states`, domain -> packed state as read) and to keep:
-- carried in the line (`carry`) or in the hash (`th_out`: domain, state, ...; `th_need`: the
-- latest `exp` among them). What the call hands back: its counts (`leased`, `work`, `denied`), the
-- reply (`out`), the <sid>:inflight entries, the payloads to read per crawl, the crawls' tally.
local b = {leaving = {}, entering = {}, owner = {}, changed = {}, touched = {}, states = {}, carry = {},
           th_out = {}, th_need = 0, throttles_exp = nil,  -- throttles_exp: nil = not read yet
           leased = 0, work = 0, denied = 0, out = {0, 0, '', ''}, entries = {}, payloads = {},
           crawls = cc_new(sid), stamps = {}, skipped = {}, skip = false, no_skip = false}

-- Keep the domain's new state (kept until `exp`): carried in the line while it stays there.
local function keep_state(b, d, state, exp, in_line)
  if own and in_line then
    b.carry[d] = state
    return
  end
  local k = #b.th_out
  b.th_out[k + 1] = d
  b.th_out[k + 2] = state
  if exp > b.th_need then b.th_need = exp end
end

local function set_owner(b, d, m)
  b.owner[d] = m
  b.changed[d] = true
end

-- The domain leaves the line entry `m` and goes back in at `score`, due at `at`.
local function requeue(b, d, m, score, at)
  local nm = ds_stamp(at) .. d
  b.leaving[#b.leaving + 1] = m
  b.entering[#b.entering + 1] = score
  b.entering[#b.entering + 1] = nm
  set_owner(b, d, nm)
  b.touched[ds_class(score)] = score
end

local function flush(b)
  local set, del = {}, {}
  for d in pairs(b.changed) do
    if b.owner[d] then
      set[#set + 1] = d
      set[#set + 1] = own and (b.owner[d] .. (b.carry[d] or b.states[d] or '')) or b.owner[d]
    else
      del[#del + 1] = d
    end
  end
  b.carry = {}
  bulk('ZREM', line, b.leaving)
  bulk('ZADD', line, b.entering)
  bulk('HSET', line_of, set)
  bulk('HDEL', line_of, del)
  if #b.th_out > 0 then
    if not b.throttles_exp then b.throttles_exp = th_hash_exp(redis.call('HGET', throttles, '')) end
    b.throttles_exp = th_write(throttles, b.th_out, b.throttles_exp, b.th_need, b.th_need + 2 * rules.window + 60)
    b.th_out, b.th_need = {}, 0
  end
  for c, score in pairs(b.touched) do cl_relist(sid, c, score, now) end
  b.leaving, b.entering, b.changed, b.touched = {}, {}, {}, {}
end

-- A line entry that does not match its domain's queue: the domain goes where its queue says.
local function mend(b, d, m)
  b.leaving[#b.leaving + 1] = m
  flush(b)  -- ds_place below reads the line as written
  local v = redis.call('HGET', line_of, d)
  if v and ds_member(v, d) == m then ds_leave(sid, d) end
  ds_place(sid, d, now)
  v = redis.call('HGET', line_of, d)
  b.owner[d] = v and ds_member(v, d) or false
  b.states[d] = nil
end

-- Lease the domain's best request (`head`: its queue's first two members with their scores); the
-- domain then goes back into the line at the time its throttle next allows it. Returns true when
-- it is due now in a better class than `score` (the classes must be looked at again).
local function lease_one(b, d, m, queue, head, score, st)
  local qm = head[1]
  redis.call('ZREM', queue, qm)
  tr_leased(sid, d, queue, #head < 4)
  local at, state, exp = tr_spend(rules, st)
  local better = false
  if #head < 4 then  -- the queue is empty now
    ds_fair_reset(sid, d)  -- nothing queued here: every crawl starts level again
    b.leaving[#b.leaving + 1] = m
    set_owner(b, d, false)
    redis.call('ZREM', heads, d)
    local held = b.states[d] or ''
    if not state and own and held ~= '' then state, exp = held, th_exp(held) end  -- it keeps what it carried
    if state then keep_state(b, d, state, exp, false) end
  else
    if state then keep_state(b, d, state, exp, true) end
    local next_score = tonumber(head[4])
    if next_score ~= score then redis.call('ZADD', heads, next_score, d) end
    requeue(b, d, m, next_score, at)
    if at > now then b.denied = b.denied + 1 end
    better = at <= now and next_score < score
  end
  b.entries[#b.entries + 1] = now + lease
  b.entries[#b.entries + 1] = d .. '\t' .. qm
  local crawl = cc_crawl(b.crawls, qm)
  if crawl then al_leased(al, crawl.appid) end
  local out = b.out
  out[#out + 1] = d
  out[#out + 1] = qm
  out[#out + 1] = ''
  out[#out + 1] = crawl and crawl.name or ''
  out[#out + 1] = 0  -- its ladder level, read for the whole batch at the end
  out[#out + 1] = ''  -- its profile's JSON, read with the payloads
  b.stamps[#b.stamps + 1] = d
  if crawl then
    cc_count(b.crawls, crawl, 'queued', -1)
    cc_count(b.crawls, crawl, 'inflight', 1)
    local requests = K.crawl_requests(sid, crawl.appid, crawl.crawlid, d)
    local p = b.payloads[requests]
    if not p then p = {fields = {}, slots = {}, crawl = crawl}; b.payloads[requests] = p end
    p.fields[#p.fields + 1] = qm_field(qm)
    p.slots[#p.slots + 1] = #out - 3
  end
  return better
end

-- Look at one due line entry (`m`, class `score`): lease, put back until its throttle allows it,
-- or mend. Returns true when the classes must be looked at again.
local function examine(b, d, m, score)
  if b.owner[d] ~= m then  -- a stale entry
    mend(b, d, m)
    b.work = b.work + 1
    return true
  elseif blacklist[d] then
    requeue(b, d, m, score, now + BLACKLIST_RECHECK)
    b.work = b.work + 1
    return false
  end
  local queue = K.queue(sid, d)
  local head = redis.call('ZRANGE', queue, 0, 1, 'WITHSCORES')
  if #head == 0 or tonumber(head[2]) ~= score then
    mend(b, d, m)
    b.work = b.work + 1
    return true
  end
  local st = tr_read(rules, d, b.states[d] or '')
  local at = st.at
  if at <= now and (al.limited or al.sharing) then
    local crawl = cc_crawl(b.crawls, head[1])
    if crawl then at = now + al_wait(al, crawl.appid) end  -- over a lease-time quota: it waits as on its throttle
    if at <= now and crawl and not b.no_skip and al_over_share(al, crawl.appid) then
      b.skip = crawl.appid  -- its app has more than its share of the slots: after the class's other due domains
      b.work = b.work + 1
      return false
    end
  end
  if at > now then
    requeue(b, d, m, score, at)
    b.denied = b.denied + 1
    b.work = b.work + 1
    return false
  end
  b.leased = b.leased + 1
  return lease_one(b, d, m, queue, head, score, st)
end

-- The owners and throttle states of a batch of due domains, by the rule of lib/domain_sets.lua:
-- carried in their line_of values under the spider's own prefix, else one read of the hash.
local function read_batch(b, domains)
  local values = redis.call('HMGET', line_of, unpack(domains))
  local uncarried = {}  -- domains whose state is in the hash
  for j, d in ipairs(domains) do
    local v = values[j]
    local member, carried = false, ''
    if v then member, carried = ds_split(v, d) end
    b.owner[d] = member
    b.states[d] = own and carried or ''
    if b.states[d] == '' then uncarried[#uncarried + 1] = d end
  end
  if #uncarried > 0 then
    local raw = redis.call('HMGET', throttles, '', unpack(uncarried))
    b.throttles_exp = th_hash_exp(raw[1])
    for j, d in ipairs(uncarried) do b.states[d] = raw[j + 1] or '' end
  end
end

-- Maintenance, then the lease loop: the best ready class gives its due domains a batch at a time.
local policy = redis.call('HMGET', K.policy(sid), 'overrides', 'adopt', 'class_walk_at', 'class_walk', 'sweep')
ov_apply_changes(sid, ARGV[9], policy[1], now)
rt_promote_due(sid, b.crawls, now, promote_max)
cl_wake(sid, now, budget)
rp_repair(sid, policy, now, budget, throttles)
while b.leased < max_items and b.work < budget do
  flush(b)
  local best = redis.call('ZRANGE', K.classes_ready(sid), 0, 0, 'WITHSCORES')
  if #best == 0 then break end
  local c, score = best[1], tonumber(best[2])
  b.touched[c] = score  -- listed again at the next flush, whatever this batch finds
  -- Domains skipped for their app's share stay first in the class's line, untouched: read past them.
  local skipped = b.skipped[c] or {}
  b.skipped[c] = skipped
  local due = redis.call('ZRANGEBYSCORE', line, score, score, 'LIMIT', #skipped,
                         math.min(max_items - b.leased, budget - b.work))
  b.work = b.work + 1
  local domains = {}
  for j, m in ipairs(due) do
    if ds_due(m) > now then break end  -- the rest of the class is not due yet
    domains[j] = string.sub(m, DS_STAMP + 1)
  end
  if #domains > 0 then
    read_batch(b, domains)
    for j, d in ipairs(domains) do
      b.no_skip = #skipped >= SKIP_MOST  -- a bounded look past them, whatever the other apps have due
      if examine(b, d, due[j], score) then break end
      if b.skip then
        skipped[#skipped + 1] = {d, due[j], al_rank(al, b.skip, #skipped)}
        b.skip = false
      end
    end
    b.no_skip = false
  elseif #skipped > 0 then  -- every due domain of the class was looked at: the skipped ones now, in order
    b.skipped[c], b.no_skip = {}, true  -- (on a cluster, their apps' in the caller's deal first)
    table.sort(skipped, function(x, y) return x[3] < y[3] end)
    for _, e in ipairs(skipped) do
      if b.leased >= max_items or examine(b, e[1], e[2], score) then break end
    end
    b.no_skip = false
  end
end
flush(b)

-- What the call hands back: its leases with their payloads, then when to come back.
local out = b.out
bulk('ZADD', K.inflight(sid), b.entries)
local profiles = {}  -- `<profiles key>\t<id>` -> its JSON, read once per call
for requests, p in pairs(b.payloads) do
  local values = redis.call('HMGET', requests, unpack(p.fields))
  for k, slot in ipairs(p.slots) do
    local payload = values[k] or ''
    out[slot] = payload
    local pid = payload ~= '' and st_fields(payload)
    if pid and pid ~= '' then
      local key = K.crawl_profiles(sid, p.crawl.appid, p.crawl.crawlid)
      local cached = profiles[key .. '\t' .. pid]
      if cached == nil then
        cached = redis.call('HGET', key, pid) or ''
        profiles[key .. '\t' .. pid] = cached
      end
      out[slot + 3] = cached
    end
  end
end
cc_write(b.crawls, state_ttl)
al_write(al)
out[4] = al_report(al)
-- Each lease's ladder level as its crawlers last wrote it with the domain's pace (ladder_pace.lua):
-- the level whose pace this call's throttle spent its hit at, whatever the domain does afterwards.
if #b.stamps > 0 then
  local levels = redis.call('HMGET', K.ladder_levels(sid), unpack(b.stamps))
  for k = 1, #b.stamps do
    local level, until_ = string.match(levels[k] or '', '^(%d+):(.+)$')
    if level and tonumber(until_) > now then out[HEAD + k * ROW - 1] = tonumber(level) end  -- 5th of 6
  end
end

local best = redis.call('ZRANGE', K.classes_ready(sid), 0, 0, 'WITHSCORES')
local next_at = -1
if #best > 0 then
  out[3] = best[2]
  next_at = now
else
  for _, key in ipairs({K.classes_snoozed(sid), K.delayed(sid)}) do
    local first = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')
    if #first > 0 and (next_at < 0 or tonumber(first[2]) < next_at) then next_at = tonumber(first[2]) end
  end
end
if next_at >= 0 then out[1] = math.max(0, math.ceil((next_at - now) * 1000)) else out[1] = -1 end
out[2] = b.denied
-- A whole batch handed out and more ready: the next idle crawler wakes in turn (lib/wake.lua).
if b.leased >= max_items and #best > 0 then wk_wake(sid) end
return out
