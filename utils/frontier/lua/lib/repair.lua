-- lib/repair.lua: a pop's self-repair, a little per call, so a frontier left inconsistent (by an
-- older Shoal, or a failed call) mends itself while it crawls.
--
-- rp_repair(sid, policy, now, most, throttles): `policy` is HMGET <sid>:policy 'overrides',
--   'adopt', 'class_walk_at', 'class_walk', 'sweep' as read at the start of the call.
--   - adoption: while <sid>:heads holds more domains than <sid>:line_of, up to `most` of them
--     from the cursor `adopt` not in the line are placed in it (ds_place), and an older Shoal's
--     sets (<sid>:ready, <sid>:ready_of, <sid>:snoozed) are deleted;
--   - once per CLASS_WALK seconds: one step of a walk over the line's classes lists a class
--     neither listing holds (cl_relist), and one step of a sweep deletes the throttle states of
--     the hash `throttles` past their time (th_sweep).
--   Writes its cursors back into <sid>:policy.

--! include keys
--! include domain_sets
--! include classes

local CLASS_WALK = 1  -- seconds between two steps of the class walk and the sweep

local function rp_adopt(sid, cursor_field, now, most)
  local heads, line_of = K.heads(sid), K.line_of(sid)
  local n = redis.call('ZCARD', heads)
  if n <= redis.call('HLEN', line_of) then return end
  local cursor = tonumber(cursor_field or '0')
  if cursor >= n then cursor = 0 end
  for _, d in ipairs(redis.call('ZRANGE', heads, cursor, cursor + most - 1)) do
    if redis.call('HEXISTS', line_of, d) == 0 then ds_place(sid, d, now) end
  end
  redis.call('HSET', K.policy(sid), 'adopt', tostring(cursor + most))
  redis.call('DEL', sid .. ':ready', sid .. ':ready_of', sid .. ':snoozed')  -- an older Shoal's sets
end

-- One step of the class walk from the class after `last` ('-inf' or nil = the first); returns
-- the class score walked to ('-inf' = the walk starts over).
local function rp_walk_classes(sid, last, now)
  local after = (last and last ~= '-inf') and ('(' .. last) or '-inf'
  local nxt = redis.call('ZRANGEBYSCORE', K.line(sid), after, '+inf', 'WITHSCORES', 'LIMIT', 0, 1)
  if #nxt == 0 then return '-inf' end
  local c = ds_class(tonumber(nxt[2]))
  if not redis.call('ZSCORE', K.classes_ready(sid), c) and not redis.call('ZSCORE', K.classes_snoozed(sid), c) then
    cl_relist(sid, c, tonumber(nxt[2]), now)
  end
  return nxt[2]
end

local function rp_repair(sid, policy, now, most, throttles)
  rp_adopt(sid, policy[2], now, most)
  if tonumber(policy[3] or '0') > now then return end
  local walked = rp_walk_classes(sid, policy[4], now)
  -- The throttle states past their time go, a thousandth of them (at least 100) a step: a pass
  -- over 100,000 domains takes under 17 minutes and costs the pops ~1% of their time.
  local count = math.max(100, math.floor(redis.call('HLEN', throttles) / 1000))
  local sweep = th_sweep(throttles, policy[5] or '0', count, now)
  redis.call('HSET', K.policy(sid), 'class_walk_at', tostring(now + CLASS_WALK), 'class_walk', walked, 'sweep', sweep)
end
