-- Add a page's SimHash to its app's near-duplicate index (the caller found none near it).
-- KEYS[1..n] band HASHes (field: the band's value, 2 bytes; value: packed 8-byte SimHashes), n = #KEYS - 1
-- KEYS[n+1] first-URL HASH (8-byte SimHash -> URL)
-- ARGV[1] SimHash (8 bytes, big-endian), ARGV[2] URL ('' = keep none), ARGV[3] TTL (s)
-- ARGV[4..n+3] the SimHash's band values (2 bytes each), in the order of KEYS
-- Each bucket is rewritten whole (HGET, append, HSET): its value is allocated at its size, where
-- APPEND's greedy growth would leave up to as much again unused. Returns the number of bands written.
local fp, url, ttl = ARGV[1], ARGV[2], tonumber(ARGV[3])
local nbands = #KEYS - 1
for i = 1, nbands do
  local bucket = redis.call('HGET', KEYS[i], ARGV[3 + i]) or ''
  redis.call('HSET', KEYS[i], ARGV[3 + i], bucket .. fp)
  redis.call('EXPIRE', KEYS[i], ttl)
end
if url ~= '' then
  redis.call('HSETNX', KEYS[nbands + 1], fp, url)
  redis.call('EXPIRE', KEYS[nbands + 1], ttl)
end
return nbands
