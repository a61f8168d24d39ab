-- fetched.lua: a leased request was fetched late; its domain's next moderated slot counts from
-- the fetch, so politeness holds at the moment of the fetch whatever the crawler's own queueing.
--
-- KEYS[1]: the throttle states of the key's prefix, `<prefix>throttles` (with its shard's hash tag);
--         a domain in the line of the spider `<prefix>` carries its state there instead
-- ARGV[1] fetch time (unix s)   ARGV[2] the domain's interval (window / hits, s)
-- ARGV[3] slack: share of an interval a slot may lag behind (pop.lua's SLACK)   ARGV[4] domain
-- Returns 1 when the slot moved forward, 0 when it was already later.
-- pop.lua allows the next hit at slot + interval, so the next fetch comes >= (1 - slack) intervals
-- after this one; a domain snoozed until the old time is snoozed again when it wakes.

--! include domain_sets

local prefix, d = th_prefix(KEYS[1]), ARGV[4]
local member, hash_exp, state = ds_state_load(prefix, d)
local interval = tonumber(ARGV[2])
local want = tonumber(ARGV[1]) - tonumber(ARGV[3]) * interval
local exp, slot, pause, delay_until, delay, hits = th_unpack(state)
if want <= slot then return 0 end
ds_state_save(prefix, d, member, hash_exp, want + 2 * interval + 60, exp, want, pause, delay_until, delay, hits)
return 1
