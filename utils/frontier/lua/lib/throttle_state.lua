-- lib/throttle_state.lua: pasted into the scripts that touch a throttle key (`--! include`).
--
-- A throttle key T (`[<spider>:][<public ip>:]<domain>`) keeps all its state in one HASH,
-- `T:throttle`, so a pop reads it with one command and writes it with one:
--   hits         the times of T's latest hits, oldest first, TH_WIDTH characters each, only those
--                still inside the window and at most `hits` of them (the throttle's hits per window)
--   slot         the moderated slot (unix s): the next hit may come one interval after it
--   pause        a not-before time (unix s): Retry-After answers, robots.txt Crawl-delay spacing
--   delay        seconds between two hits (robots.txt Crawl-delay), in force until `delay_until`
--   exp          when the key expires (unix s): writers extend it only when they need it longer

local TH_WIDTH = 17

local function th_stamp(at)
  return string.format('%17.6f', at)
end

-- The time of the i-th hit (0-based) of a `hits` field.
local function th_hit(hits, i)
  return tonumber(string.sub(hits, i * TH_WIDTH + 1, (i + 1) * TH_WIDTH))
end

-- How many hits of a `hits` field came at or before `t` (binary search: the field is ordered).
local function th_count_until(hits, t)
  local lo, hi = 0, #hits / TH_WIDTH
  while lo < hi do
    local mid = math.floor((lo + hi) / 2)
    if th_hit(hits, mid) <= t then lo = mid + 1 else hi = mid end
  end
  return lo
end

-- Write fields (a table) of the hash `key` and keep it alive at least until `need` (unix s).
-- `exp` is its `exp` field when the caller has read it already (else it is read here). When the
-- key must live longer it is kept until `ahead` if that is later, so that a key written at every
-- hit is not extended at every hit.
local function th_write(key, fields, need, exp, ahead)
  exp = exp or tonumber(redis.call('HGET', key, 'exp') or '0')
  local args, keep = {}, nil
  for field, value in pairs(fields) do
    args[#args + 1] = field
    args[#args + 1] = value
  end
  if need > exp then
    keep = math.max(need, ahead or need)
    args[#args + 1] = 'exp'
    args[#args + 1] = th_stamp(keep)
  end
  redis.call('HSET', key, unpack(args))
  if keep then redis.call('PEXPIREAT', key, math.ceil(keep * 1000)) end
end
