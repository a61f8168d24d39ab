-- throttle_delay.lua: seconds between two hits of a throttle key, cluster-wide, for a while
-- (robots.txt Crawl-delay); pop.lua spaces the key's hits by it even when it is otherwise unthrottled.
--
-- KEYS[1]: the throttle states of the key's prefix, `<prefix>throttles` (with its shard's hash tag);
--         under a spider's own prefix a domain in its line carries its state there instead
--         (lib/domain_sets.lua, "Where a domain's throttle state is")
-- ARGV[1] seconds between two hits   ARGV[2] how long the delay holds (s)   ARGV[3] domain

--! include domain_sets

local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local until_ = now + tonumber(ARGV[2])
local d = ARGV[3]
local loc = ds_state_find(th_prefix(KEYS[1]), d)
local s = th_decode(loc.state)
s.delay_until, s.delay = until_, tonumber(ARGV[1])
ds_state_keep(loc, d, s, until_)
return 1
