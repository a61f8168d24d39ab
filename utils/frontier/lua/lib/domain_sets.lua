-- lib/domain_sets.lua: pasted into the scripts that change a domain's queue (`--! include`).
--
-- Every domain with queued requests is in exactly one of two sets of its spider:
--   <sid>:ready    members `<13-hex µs since when it is due><domain>`, scored by the domain's best
--                  queue score (-priority): domains whose throttle allowed them when last looked at.
--                  The lowest score is leased first, and among equal scores the domain due the
--                  longest (a domain that stays due after a lease goes to the back of the line).
--                  <sid>:ready_of maps each of them to its member.
--   <sid>:snoozed  domain -> the time (unix s) its throttle next allows it; pop.lua moves the due
--                  ones to ready.
-- <sid>:heads (domain -> best queue score) stays the registry of domains with queued requests.
-- A script that changed a domain's queue calls ds_place(sid, domain, now) once afterwards.

local function ds_stamp(at)
  return string.format('%013x', math.floor(at * 1000000))
end

local function ds_leave(sid, d)  -- out of ready (leased empty, snoozed or gone)
  local m = redis.call('HGET', sid .. ':ready_of', d)
  if m then
    redis.call('ZREM', sid .. ':ready', m)
    redis.call('HDEL', sid .. ':ready_of', d)
  end
end

local function ds_enter(sid, d, score, since)  -- into ready, due since `since`
  local m = ds_stamp(since) .. d
  redis.call('ZADD', sid .. ':ready', score, m)
  redis.call('HSET', sid .. ':ready_of', d, m)
end

-- Where the domain's queue says it belongs: nowhere when empty; else ready unless it is snoozed,
-- keeping its place in line while its best score stays the same.
local function ds_place(sid, d, since)
  local h = redis.call('ZRANGE', sid .. ':' .. d .. ':queue', 0, 0, 'WITHSCORES')
  if #h == 0 then
    ds_leave(sid, d)
    redis.call('ZREM', sid .. ':heads', d)
    redis.call('ZREM', sid .. ':snoozed', d)
    return
  end
  local score = tonumber(h[2])
  redis.call('ZADD', sid .. ':heads', score, d)
  local m = redis.call('HGET', sid .. ':ready_of', d)
  if m then
    local was = redis.call('ZSCORE', sid .. ':ready', m)
    if was and tonumber(was) == score then return end
    redis.call('ZREM', sid .. ':ready', m)  -- a new best priority: in line from now at that priority
    ds_enter(sid, d, score, since)
  elseif not redis.call('ZSCORE', sid .. ':snoozed', d) then
    ds_enter(sid, d, score, since)
  end
end
