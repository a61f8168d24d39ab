-- extend.lua: push the lease deadlines of requests a spider still works on (long downloads,
-- pages waiting for Kafka's confirmation).
--
-- KEYS[1]: a key of the frontier shard, for routing only. On a Redis Cluster the spiderid arrives
--         prefixed with its shard's hash tag (utils/frontier/shards.py), so every key lives in one slot.
-- ARGV[1] spiderid   ARGV[2] lease seconds from now
-- then the in-flight members `<domain>\t<queue member>` to extend.
-- Returns the members that were no longer in flight (reaped: another copy runs now).
-- Only existing members are touched (ZADD XX), so a lease the reaper took is never revived.

--! include keys

local inflight = K.inflight(ARGV[1])
local t = redis.call('TIME')
local deadline = tonumber(t[1]) + tonumber(t[2]) / 1000000 + tonumber(ARGV[2])
local lost = {}
for i = 3, #ARGV do
  if redis.call('ZSCORE', inflight, ARGV[i]) then
    redis.call('ZADD', inflight, 'XX', deadline, ARGV[i])
  else
    lost[#lost + 1] = ARGV[i]
  end
end
return lost
