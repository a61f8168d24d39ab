-- fetched.lua: a leased request was fetched late; its domain's next moderated slot counts from
-- the fetch, so politeness holds at the moment of the fetch whatever the crawler's own queueing.
--
-- KEYS[1]: the throttle key's hash `<throttle key>:throttle` (with its shard's hash tag)
-- ARGV[1] fetch time (unix s)   ARGV[2] the domain's interval (window / hits, s)
-- ARGV[3] slack: share of an interval a slot may lag behind (pop.lua's SLACK)
-- Returns 1 when the slot moved forward, 0 when it was already later.
-- pop.lua allows the next hit at slot + interval, so the next fetch comes >= (1 - slack) intervals
-- after this one; a domain snoozed until the old time is snoozed again when it wakes.

--! include throttle_state

local f = redis.call('HMGET', KEYS[1], 'slot', 'exp')
local interval = tonumber(ARGV[2])
local want = tonumber(ARGV[1]) - tonumber(ARGV[3]) * interval
if want <= (tonumber(f[1]) or 0) then return 0 end
th_write(KEYS[1], {slot = th_stamp(want)}, want + 2 * interval + 60, tonumber(f[2]) or 0)
return 1
