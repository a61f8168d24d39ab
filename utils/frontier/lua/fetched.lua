-- fetched.lua: a leased request was fetched late; its domain's next moderated slot counts from
-- the fetch, so politeness holds at the moment of the fetch whatever the crawler's own queueing.
--
-- KEYS[1]: the throttle states of the key's prefix, `<prefix>throttles` (with its shard's hash tag);
--         under a spider's own prefix a domain in its line carries its state there instead
--         (lib/domain_sets.lua, "Where a domain's throttle state is")
-- ARGV[1] fetch time (unix s)   ARGV[2] the domain's interval (window / hits, s)
-- ARGV[3] slack: share of an interval a slot may lag behind (SLOT_SLACK, utils/frontier/types.py)   ARGV[4] domain
-- Returns 1 when the slot moved forward, 0 when it was already later.
-- pop.lua allows the next hit at slot + interval, so the next fetch comes >= (1 - slack) intervals
-- after this one; a domain snoozed until the old time is snoozed again when it wakes.

--! include domain_sets

local d, interval = ARGV[4], tonumber(ARGV[2])
local loc = ds_state_find(th_prefix(KEYS[1]), d)
local s = th_decode(loc.state)
local want = tonumber(ARGV[1]) - tonumber(ARGV[3]) * interval
if want <= s.slot then return 0 end
s.slot = want
ds_state_keep(loc, d, s, want + 2 * interval + 60)
return 1
