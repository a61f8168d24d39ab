-- mark_finished.lua: mark a crawl finished once per amount of work, on a Redis Cluster.
--
-- KEYS[1] the crawl's progress hash in the first frontier shard (the one that holds the mark)
-- ARGV[1] the crawl's `enqueued` summed over every shard, read while nothing was pending
-- Returns 1 when this call marked it (announce it), 0 when it was marked for that much work
-- already (by this or another redis monitor). New work after a mark raises `enqueued`, so the
-- crawl can be marked, and announced, again once that work is done too.

local enqueued = tonumber(ARGV[1])
local marked = tonumber(redis.call('HGET', KEYS[1], 'finished_enqueued') or '-1')
if marked >= enqueued then return 0 end
local t = redis.call('TIME')
redis.call('HSET', KEYS[1], 'finished', tostring(tonumber(t[1]) + tonumber(t[2]) / 1000000),
           'finished_enqueued', enqueued)
return 1
