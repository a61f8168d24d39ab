-- lib/domain_sets.lua: pasted into the scripts that change a domain's queue (`--! include`).
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
-- Where a throttle state is: a domain in its spider's line carries its state under the prefix
-- `<sid>:` in its line_of value when that holds one (the newer then); otherwise the state is in
-- the prefix's hash, `<sid>:throttles`. A domain leaving the line leaves its state there (th_park).

--! include throttle_state

local DS_STAMP = 13  -- hex digits of a line member's due time

local function ds_stamp(at)
  return string.format('%013x', math.floor(at * 1000000))
end

-- When the line member `m` is due (unix s).
local function ds_due(m)
  return tonumber(string.sub(m, 1, 13), 16) / 1000000
end

-- A line_of value's line member, and the throttle state it carries ('' = none).
local function ds_member(value, d)
  if #value == DS_STAMP + #d then return value end
  return string.sub(value, 1, DS_STAMP + #d)
end
local function ds_carried(value, d)
  return string.sub(value, DS_STAMP + #d + 1)
end

local function ds_class(score)
  return string.format('%.17g', score)
end

-- A domain of class `score` is due at `at`: the class is listed ready, or snoozed until `at` at
-- the latest.
local function ds_list_class(sid, score, at, now)
  if at <= now then
    redis.call('ZADD', sid .. ':classes_ready', score, ds_class(score))
  else
    redis.call('ZADD', sid .. ':classes_snoozed', 'LT', at, ds_class(score))
  end
end

local function ds_leave(sid, d)  -- out of the line (queue emptied or gone); its state stays
  local v = redis.call('HGET', sid .. ':line_of', d)
  if v then
    redis.call('ZREM', sid .. ':line', ds_member(v, d))
    redis.call('HDEL', sid .. ':line_of', d)
    th_park(th_hash(sid .. ':'), d, ds_carried(v, d))
  end
end

-- Into the line at `score`, due at `at`, carrying the throttle state `state` ('' or nil = none).
local function ds_enter(sid, d, score, at, now, state)
  local m = ds_stamp(at) .. d
  redis.call('ZADD', sid .. ':line', score, m)
  redis.call('HSET', sid .. ':line_of', d, m .. (state or ''))
  ds_list_class(sid, score, at, now)
end

-- Where the domain's queue says it belongs: out of the line when empty; else in the line at its
-- best score. A domain already in line there keeps its place; one whose best score changed moves
-- to its new class, due when it was due (or now, if that was earlier).
local function ds_place(sid, d, now)
  local h = redis.call('ZRANGE', sid .. ':' .. d .. ':queue', 0, 0, 'WITHSCORES')
  if #h == 0 then
    ds_leave(sid, d)
    redis.call('ZREM', sid .. ':heads', d)
    return
  end
  local score = tonumber(h[2])
  redis.call('ZADD', sid .. ':heads', score, d)
  local v = redis.call('HGET', sid .. ':line_of', d)
  local at, state = now, ''
  if v then
    local m = ds_member(v, d)
    local was = redis.call('ZSCORE', sid .. ':line', m)
    if was and tonumber(was) == score then return end
    if was then redis.call('ZREM', sid .. ':line', m) end
    at, state = math.max(ds_due(m), now), ds_carried(v, d)
  end
  ds_enter(sid, d, score, at, now, state)
end

-- One domain's throttle state under `prefix` (the single-domain writers: Retry-After,
-- Crawl-delay, a late fetch): the line member carrying it (false = in the hash), the hash's
-- expiry, the state ('' = none). Only a spider's own prefix `<sid>:` has a `<sid>:line_of`.
local function ds_state_load(prefix, d)
  local v = redis.call('HGET', prefix .. 'line_of', d)
  if v and #v > DS_STAMP + #d then return ds_member(v, d), 0, ds_carried(v, d) end
  local hash_exp, state = th_read(th_hash(prefix), d)
  return false, hash_exp, state
end

-- Write it back where ds_state_load found it, kept at least until `need` (the fields as th_pack
-- takes them).
local function ds_state_save(prefix, d, member, hash_exp, need, exp, slot, pause, delay_until, delay, hits)
  if member then
    local state = th_pack(math.max(exp, need), slot, pause, delay_until, delay, hits)
    redis.call('HSET', prefix .. 'line_of', d, member .. state)
  else
    th_save(th_hash(prefix), hash_exp, d, need, exp, slot, pause, delay_until, delay, hits)
  end
end
