-- lib/domain_sets.lua: the line of a spider's domains and its class listings, and where a domain's
-- throttle state is; pasted into the scripts that change a domain's queue (`--! include`).
--
-- Every domain with queued requests is in its spider's line once, whether its throttle allows it
-- now or not:
--   <sid>:line     members `<13-hex µs when it is next due><domain>`, scored by the domain's best
--                  queue score (-priority), its class. Equal scores sort by member, so each class
--                  is a line of domains in the order they fall due: the ones due now first, oldest
--                  due first, then the snoozed ones by the time their throttle next allows them.
--   <sid>:line_of  domain -> its member in the line, then, under the spider's own throttle prefix
--                  `<sid>:`, its throttle state (ds_carried; lib/throttle_state.lua): a lease
--                  reads and writes this value anyway, so the state costs no lookup of its own.
-- The classes of the line are listed in one of two sets, so a pop finds the best class with a due
-- domain without looking at the others:
--   <sid>:classes_ready    class -> its score: classes whose first domain is due
--   <sid>:classes_snoozed  class -> when its first domain falls due
-- A class is named by ds_class(score). A listing may be stale (an emptied class, a class in both
-- sets): pop.lua sets it right when it looks at the class. A class with a domain due at `at` is
-- listed by then at the latest (ds_list_class), so none is forgotten.
-- <sid>:heads (domain -> best queue score) stays the registry of domains with queued requests.
-- A script that changed a domain's queue calls ds_place(sid, domain, now) once afterwards.
--
-- Where a domain's throttle state is (the one rule; docs/concepts/frontier.md says it too, and
-- utils/frontier/throttle_state.py `locate` applies it in Python):
--   1. a throttle prefix of one segment, `<x>:`, is the spider x's own prefix
--      (K.spider_throttle_prefix; ds_spider_of tells the spider of a prefix). Only then can the
--      state be carried: when the domain is in that spider's line and its `<x>:line_of` value is
--      longer than its line member, the rest of the value is the state (ds_split).
--   2. otherwise (another prefix, a domain out of the line, a value carrying nothing) it is the
--      domain's field of the prefix's hash, K.throttles(prefix).
-- A domain leaving the line leaves its carried state in the hash (th_park). Writers of one
-- domain's state go through ds_state_find / ds_state_keep; pop.lua reads a batch by the same rule.
--
-- Functions: ds_stamp, ds_due, ds_split, ds_member, ds_carried, ds_class (a member's parts);
-- ds_list_class, ds_leave, ds_enter, ds_place (moving a domain); ds_spider_of, ds_state_find,
-- ds_state_keep (one domain's throttle state, wherever it is).

--! include keys
--! include throttle_state

local DS_STAMP = 13  -- hex digits of a line member's due time

local function ds_stamp(at)
  return string.format('%013x', math.floor(at * 1000000))
end

-- When the line member `m` is due (unix s).
local function ds_due(m)
  return tonumber(string.sub(m, 1, 13), 16) / 1000000
end

-- A line_of value of the domain `d`: its line member, and the throttle state it carries ('' =
-- none). The only place that knows the member's size.
local function ds_split(value, d)
  local size = DS_STAMP + #d
  if #value == size then return value, '' end
  return string.sub(value, 1, size), string.sub(value, size + 1)
end
local function ds_member(value, d)
  return (ds_split(value, d))
end
local function ds_carried(value, d)
  local _, state = ds_split(value, d)
  return state
end

local function ds_class(score)
  return string.format('%.17g', score)
end

-- A domain of class `score` is due at `at`: the class is listed ready, or snoozed until `at` at
-- the latest.
local function ds_list_class(sid, score, at, now)
  if at <= now then
    redis.call('ZADD', K.classes_ready(sid), score, ds_class(score))
  else
    redis.call('ZADD', K.classes_snoozed(sid), 'LT', at, ds_class(score))
  end
end

local function ds_leave(sid, d)  -- out of the line (queue emptied or gone); its state stays
  local line_of = K.line_of(sid)
  local v = redis.call('HGET', line_of, d)
  if v then
    local m, state = ds_split(v, d)
    redis.call('ZREM', K.line(sid), m)
    redis.call('HDEL', line_of, d)
    th_park(K.throttles(K.spider_throttle_prefix(sid)), d, state)
  end
end

-- Into the line at `score`, due at `at`, carrying the throttle state `state` ('' or nil = none).
local function ds_enter(sid, d, score, at, now, state)
  local m = ds_stamp(at) .. d
  redis.call('ZADD', K.line(sid), score, m)
  redis.call('HSET', K.line_of(sid), d, m .. (state or ''))
  ds_list_class(sid, score, at, now)
end

-- A domain's queue emptied: its crawls start level again (lib/fair.lua), unless part of its queue is
-- on disk (lib/tier.lua), whose requests new ones must still come after.
local function ds_fair_reset(sid, d)
  if redis.call('HEXISTS', K.tier_tails(sid), d) == 0 then redis.call('DEL', K.fair(sid, d)) end
end

-- Where the domain's queue says it belongs: out of the line when empty; else in the line at its
-- best score. A domain already in line there keeps its place; one whose best score changed moves
-- to its new class, due when it was due (or now, if that was earlier).
local function ds_place(sid, d, now)
  local h = redis.call('ZRANGE', K.queue(sid, d), 0, 0, 'WITHSCORES')
  if #h == 0 then
    ds_leave(sid, d)
    redis.call('ZREM', K.heads(sid), d)
    ds_fair_reset(sid, d)
    return
  end
  local score = tonumber(h[2])
  redis.call('ZADD', K.heads(sid), score, d)
  local v = redis.call('HGET', K.line_of(sid), d)
  local at, state = now, ''
  if v then
    local m, carried = ds_split(v, d)
    local line = K.line(sid)
    local was = redis.call('ZSCORE', line, m)
    if was and tonumber(was) == score then return end
    if was then redis.call('ZREM', line, m) end
    at, state = math.max(ds_due(m), now), carried
  end
  ds_enter(sid, d, score, at, now, state)
end

-- The spider whose own throttle prefix `prefix` is (rule 1 above), nil when it is no spider's.
local function ds_spider_of(prefix)
  if string.sub(prefix, -1) ~= ':' then return nil end
  local head = string.sub(prefix, 1, -2)
  if head == '' or string.find(head, ':', 1, true) then return nil end
  return head
end

-- Where one domain's throttle state under `prefix` is, and the state (the single-domain writers:
-- Retry-After, Crawl-delay, a late fetch): {line_of = the spider's line_of when the state is
-- carried there (else nil), member = its line member, hash = K.throttles(prefix), hash_exp = the
-- hash's expiry, state = the packed state ('' = none)}.
local function ds_state_find(prefix, d)
  local sid = ds_spider_of(prefix)
  local loc = {hash = K.throttles(prefix), hash_exp = 0}
  if sid then
    local line_of = K.line_of(sid)
    local v = redis.call('HGET', line_of, d)
    if v then
      local member, state = ds_split(v, d)
      if state ~= '' then
        loc.line_of, loc.member, loc.state = line_of, member, state
        return loc
      end
    end
  end
  loc.hash_exp, loc.state = th_read(loc.hash, d)
  return loc
end

-- Write the state `s` (th_decode's fields) of the domain `d` back where ds_state_find found it
-- (`loc`), kept at least until `need`.
local function ds_state_keep(loc, d, s, need)
  if loc.line_of then
    local state = th_pack(math.max(s.exp, need), s.slot, s.pause, s.delay_until, s.delay, s.hits)
    redis.call('HSET', loc.line_of, d, loc.member .. state)
  else
    th_save(loc.hash, loc.hash_exp, d, need, s.exp, s.slot, s.pause, s.delay_until, s.delay, s.hits)
  end
end
