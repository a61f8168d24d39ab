-- upgrade.lua: move one chunk of a crawl's requests stored by an older Shoal into the current layout.
--
-- KEYS[1]: a key of the frontier shard, for routing only. On a Redis Cluster the spiderid arrives
--         prefixed with its shard's hash tag (utils/frontier/shards.py), so every key lives in one slot.
-- ARGV[1] spiderid   ARGV[2] appid   ARGV[3] crawlid   ARGV[4] most requests to move in this call
-- An older Shoal kept all of a crawl's requests in one hash (K.legacy_crawl_requests, field
-- `<id><domain>`); each moves to the crawl's requests hash of its domain under `<id>` (lib/stored.lua)
-- with its payload as it is (an older JSON payload is read as before). Queue members, leases and
-- progress counters do not change. A request moves in one call, so one killed half-way is in exactly
-- one of the two places. Returns how many are left to move (call again while > 0).

--! include stored

local sid, appid, crawlid, limit = ARGV[1], ARGV[2], ARGV[3], tonumber(ARGV[4])
local legacy = K.legacy_crawl_requests(sid, appid, crawlid)
if redis.call('TYPE', legacy).ok ~= 'hash' then return 0 end
for _, field in ipairs(redis.call('HRANDFIELD', legacy, limit)) do
  st_put(sid, appid, crawlid, string.sub(field, 17), string.sub(field, 1, 16), redis.call('HGET', legacy, field))
  redis.call('HDEL', legacy, field)
end
return redis.call('HLEN', legacy)
