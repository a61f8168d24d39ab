-- claim_expiry.lua: take a crawl's expiry, once: the first redis monitor to see it due wins.
--
-- KEYS[1] the crawl's timeout key (`timeout:<spiderid>:<appid>:<crawlid>`, Scrapy Cluster's name)
-- Returns 1 when the key held a time that has passed (the key is deleted: no other monitor will
-- expire this crawl), else 0 (no expiry, or a later one).

local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local at = tonumber(redis.call('GET', KEYS[1]) or '')
if not at or at <= 0 or at > now then return 0 end
redis.call('DEL', KEYS[1])
return 1
