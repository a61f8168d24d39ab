-- fetched.lua: a leased request was fetched late; its domain's next moderated slot counts from
-- the fetch, so politeness holds at the moment of the fetch whatever the crawler's own queueing.
--
-- KEYS[1]: the throttle states of the key's prefix, `<prefix>throttles` (with its shard's hash tag);
--         under a spider's own prefix a domain in its line carries its state there instead
--         (lib/domain_sets.lua, "Where a domain's throttle state is")
-- ARGV[1] fetch time (unix s)   ARGV[2] the domain's interval (window / hits, s)
-- ARGV[3] slack: share of an interval a slot may lag behind (SLOT_SLACK, utils/frontier/types.py)   ARGV[4] domain
-- ARGV[2] is 0 for a domain whose hits are spaced only by a delay.
-- Returns 1 when the slot (or the delay's pause) moved forward, 0 when it was already later.
-- pop.lua allows the next hit at slot + interval, so the next fetch comes >= (1 - slack) intervals
-- after this one; a domain snoozed until the old time is snoozed again when it wakes.

--! include domain_sets

local d, at, interval, slack = ARGV[4], tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local loc = ds_state_find(th_prefix(KEYS[1]), d)
local s = th_decode(loc.state)
local want, moved = at - slack * interval, false
if interval > 0 and want > s.slot then
  s.slot, moved = want, true
end
-- A delay (the ladder's LADDER_SLOW_DELAY, a Crawl-delay) spaces hits from the fetch too: the next
-- comes >= (1 - slack) delays after this one.
if s.delay > 0 and s.delay_until > at and at + (1 - slack) * s.delay > s.pause then
  s.pause, moved = at + (1 - slack) * s.delay, true
end
if not moved then return 0 end
ds_state_keep(loc, d, s, math.max(want + 2 * interval + 60, s.pause))
return 1
