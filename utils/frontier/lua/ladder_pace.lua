-- ladder_pace.lua: a domain's ladder level and its pace, together, for pop.lua: the level pop.lua
-- stamps on each of its leases and the seconds between two of its hits (LADDER_SLOW_DELAY at
-- levels 1-3, none at 0 and 4), so a lease is stamped with the level whose pace its hit was spent at.
--
-- KEYS[1]: the spider's ladder levels, `<sid>:ladder_levels` (with its shard's hash tag)
-- KEYS[2]: the throttle states of the domain's prefix, `<prefix>throttles` (same shard), as
--         throttle_delay.lua takes it; absent: the level only (set by hand, `shoal domain`: the
--         crawlers write its pace when they next read it)
-- ARGV[1] level   ARGV[2] seconds between two hits (0 = none)   ARGV[3] how long both hold (s)
-- ARGV[4] domain
-- A delay that begins here counts from now: the next hit comes `seconds` after this call, not after
-- the next hit spent (an earlier hit, or a Retry-After pause ending sooner, would let it come early).
-- A delay already holding keeps its spacing (another crawler writing the same level, read later).

--! include domain_sets

local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local level, seconds, hold, d = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), ARGV[4]
local until_ = now + hold
if level > 0 then
  redis.call('HSET', KEYS[1], d, level .. ':' .. until_)
  if hold > 0 and redis.call('TTL', KEYS[1]) < hold then redis.call('EXPIRE', KEYS[1], math.ceil(hold)) end
else
  redis.call('HDEL', KEYS[1], d)
end
if #KEYS < 2 then return 1 end
local loc = ds_state_find(th_prefix(KEYS[2]), d)
local s = th_decode(loc.state)
if seconds > 0 and not (s.delay_until > now and s.delay > 0) then
  s.pause = math.max(s.pause, now + seconds)
end
s.delay_until, s.delay = until_, seconds
ds_state_keep(loc, d, s, until_)
return 1
