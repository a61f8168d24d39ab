-- lib/wake.lua: wake an idle crawler of a spider as soon as it has work (issue 37).
--
-- wk_wake(sid): leave one token in <sid>:wake (a LIST kept at most one long, expiring after
--   WAKE_TTL s) for a crawler blocked on it (BLPOP, crawler/scheduler.py) to take and pop at once,
--   instead of polling Redis 20 times a second while it has nothing to do. Called once per
--   spider by the scripts that give a spider's queues work (enqueue, release, reap), and by a pop
--   that handed out its whole batch (more may be waiting: the next idle crawler wakes in turn).
--   A token nobody waits for costs one spurious pop, later.

--! include keys

local WAKE_TTL = 60

local function wk_wake(sid)
  local key = K.wake(sid)
  if redis.call('LLEN', key) == 0 then redis.call('RPUSH', key, '1') end
  redis.call('EXPIRE', key, WAKE_TTL)
end
