-- lib/classes.lua: keeping the listing of the line's classes right (lib/domain_sets.lua says what
-- a class and the two listings are).
--
-- cl_wake(sid, now, most): up to `most` classes of <sid>:classes_snoozed whose first domain has
--   fallen due move to <sid>:classes_ready.
-- cl_relist(sid, c, score, now): the class `c` (score `score`) goes where its first domain in
--   <sid>:line says: ready when it is due, snoozed until it is due, in neither when the class is
--   empty. Reads one member of the line; writes both listings.

--! include keys
--! include bulk
--! include domain_sets

local function cl_wake(sid, now, most)
  local snoozed = K.classes_snoozed(sid)
  local due = redis.call('ZRANGEBYSCORE', snoozed, '-inf', now, 'LIMIT', 0, most)
  if #due == 0 then return end
  local members = {}
  for _, c in ipairs(due) do
    members[#members + 1] = c
    members[#members + 1] = c
  end
  bulk('ZADD', K.classes_ready(sid), members)
  bulk('ZREM', snoozed, due)
end

local function cl_relist(sid, c, score, now)
  local ready, snoozed = K.classes_ready(sid), K.classes_snoozed(sid)
  local first = redis.call('ZRANGEBYSCORE', K.line(sid), score, score, 'LIMIT', 0, 1)
  if #first == 0 then
    redis.call('ZREM', ready, c)
    redis.call('ZREM', snoozed, c)
  elseif ds_due(first[1]) <= now then
    redis.call('ZADD', ready, score, c)
    redis.call('ZREM', snoozed, c)
  else
    redis.call('ZREM', ready, c)
    redis.call('ZADD', snoozed, ds_due(first[1]), c)
  end
end
