-- proxy_ban.lua: one ban of a proxy by a domain; quarantines it there, and everywhere after enough domains.
--
-- KEYS[1]: the proxy's state key (routing; keys follow utils/proxies/keys.py, one hash tag per proxy).
-- ARGV: label (scheme://host:port), domain, cool-down (s), cool-down cap (s),
--       domains that make a global quarantine, state TTL (s).
-- A ban while the proxy is already quarantined for the domain only counts (in-flight requests of the
-- same proxy report the same ban); otherwise the domain's strikes grow and the quarantine lasts
-- cool-down * 2^(strikes - 1), at most the cap.
-- Returns {domain quarantine end, global quarantine end (0 = none)} as strings (unix s).

local label, domain = ARGV[1], ARGV[2]
local base, cap, limit, ttl = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local state = 'shoal:proxy:{' .. label .. '}'
local per_domain = state .. ':domain:' .. domain
local quarantined = state .. ':quarantined'

redis.call('HINCRBY', state, 'bans', 1)
redis.call('HINCRBY', per_domain, 'bans', 1)
local ends = tonumber(redis.call('HGET', per_domain, 'until') or '0')
if ends <= now then
  local strikes = redis.call('HINCRBY', per_domain, 'strikes', 1)
  ends = now + math.min(base * 2 ^ (strikes - 1), cap)
  redis.call('HSET', per_domain, 'until', tostring(ends))
  redis.call('ZADD', quarantined, ends, domain)
end
redis.call('ZREMRANGEBYSCORE', quarantined, '-inf', now)

local global = tonumber(redis.call('HGET', state, 'until') or '0')
if global <= now then
  global = 0
  if redis.call('ZCARD', quarantined) >= limit then
    global = ends
    redis.call('HSET', state, 'until', tostring(global))
  end
end
for _, key in ipairs({state, per_domain, quarantined}) do
  redis.call('EXPIRE', key, ttl)
end
return {tostring(ends), tostring(global)}
