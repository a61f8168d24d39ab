-- lib/domain_sets.lua: pasted into the scripts that change a domain's queue (`--! include`).
--
-- Every domain with queued requests is in its spider's line once, whether its throttle allows it
-- now or not:
--   <sid>:line     members `<13-hex µs when it is next due><domain>`, scored by the domain's best
--                  queue score (-priority), its class. Equal scores sort by member, so each class
--                  is a line of domains in the order they fall due: the ones due now first, oldest
--                  due first, then the snoozed ones by the time their throttle next allows them.
--   <sid>:line_of  domain -> its member in the line.
-- The classes of the line are listed in one of two sets, so a pop finds the best class with a due
-- domain without looking at the others:
--   <sid>:classes_ready    class -> its score: classes whose first domain is due
--   <sid>:classes_snoozed  class -> when its first domain falls due
-- A class is named by ds_class(score). A listing may be stale (an emptied class, a class in both
-- sets): pop.lua sets it right when it looks at the class. A class with a domain due at `at` is
-- listed by then at the latest (ds_list_class), so none is forgotten.
-- <sid>:heads (domain -> best queue score) stays the registry of domains with queued requests.
-- A script that changed a domain's queue calls ds_place(sid, domain, now) once afterwards.

local function ds_stamp(at)
  return string.format('%013x', math.floor(at * 1000000))
end

-- When the line member `m` is due (unix s).
local function ds_due(m)
  return tonumber(string.sub(m, 1, 13), 16) / 1000000
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

local function ds_leave(sid, d)  -- out of the line (queue emptied or gone)
  local m = redis.call('HGET', sid .. ':line_of', d)
  if m then
    redis.call('ZREM', sid .. ':line', m)
    redis.call('HDEL', sid .. ':line_of', d)
  end
end

local function ds_enter(sid, d, score, at, now)  -- into the line at `score`, due at `at`
  local m = ds_stamp(at) .. d
  redis.call('ZADD', sid .. ':line', score, m)
  redis.call('HSET', sid .. ':line_of', d, m)
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
  local m = redis.call('HGET', sid .. ':line_of', d)
  local at = now
  if m then
    local was = redis.call('ZSCORE', sid .. ':line', m)
    if was and tonumber(was) == score then return end
    if was then redis.call('ZREM', sid .. ':line', m) end
    at = math.max(ds_due(m), now)
  end
  ds_enter(sid, d, score, at, now)
end
