-- throttle_delay.lua: seconds between two hits of a throttle key, cluster-wide, for a while
-- (robots.txt Crawl-delay); pop.lua spaces the key's hits by it even when it is otherwise unthrottled.
--
-- KEYS[1]: the throttle key's hash `<throttle key>:throttle` (with its shard's hash tag)
-- ARGV[1] seconds between two hits   ARGV[2] how long the delay holds (s)

--! include throttle_state

local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local until_ = now + tonumber(ARGV[2])
th_write(KEYS[1], {delay = ARGV[1], delay_until = th_stamp(until_)}, until_)
return 1
