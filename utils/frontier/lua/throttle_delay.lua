-- throttle_delay.lua: seconds between two hits of a throttle key, cluster-wide, for a while
-- (robots.txt Crawl-delay); pop.lua spaces the key's hits by it even when it is otherwise unthrottled.
--
-- KEYS[1]: the throttle states of the key's prefix, `<prefix>throttles` (with its shard's hash tag);
--         a domain in the line of the spider `<prefix>` carries its state there instead
-- ARGV[1] seconds between two hits   ARGV[2] how long the delay holds (s)   ARGV[3] domain

--! include domain_sets

local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local until_ = now + tonumber(ARGV[2])
local prefix, d = th_prefix(KEYS[1]), ARGV[3]
local member, hash_exp, state = ds_state_load(prefix, d)
local exp, slot, pause, _, _, hits = th_unpack(state)
ds_state_save(prefix, d, member, hash_exp, until_, exp, slot, pause, until_, tonumber(ARGV[1]), hits)
return 1
