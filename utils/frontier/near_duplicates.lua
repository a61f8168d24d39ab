-- Look a page's SimHash up in its app's near-duplicate index, and add it when nothing is near.
-- KEYS[1..n] band HASHes (field: the band's value, 2 bytes; value: packed 8-byte SimHashes), n = #KEYS - 2
-- KEYS[n+1] first-URL HASH (8-byte SimHash -> URL), KEYS[n+2] the crawl's per-host near-duplicate counts
-- ARGV[1] SimHash (8 bytes, big-endian), ARGV[2] URL, ARGV[3] host, ARGV[4] TTL (s), ARGV[5] near (bits)
-- ARGV[6..n+5] the SimHash's band values (2 bytes each), in the order of KEYS
-- Returns {nearest SimHash or false, its first URL or false, host's near-duplicates in this crawl}.
-- A candidate shares a band with the SimHash; it is near when within `near` bits of all 64.
local fp, url, host = ARGV[1], ARGV[2], ARGV[3]
local ttl, near = tonumber(ARGV[4]), tonumber(ARGV[5])
local nbands = #KEYS - 2
local first_key, hosts_key = KEYS[nbands + 1], KEYS[nbands + 2]
local a_hi, a_lo = (struct.unpack('>I4', fp, 1)), (struct.unpack('>I4', fp, 5))  -- (): the value, not its end

local function bits(x)
  local n = 0
  while x ~= 0 do x = bit.band(x, x - 1); n = n + 1 end
  return n
end

local found, buckets = nil, {}
for i = 1, nbands do
  local bucket = redis.call('HGET', KEYS[i], ARGV[5 + i]) or ''
  buckets[i] = bucket
  for pos = 1, #bucket - 7, 8 do
    local d = bits(bit.bxor(a_hi, (struct.unpack('>I4', bucket, pos))))
    if d <= near then d = d + bits(bit.bxor(a_lo, (struct.unpack('>I4', bucket, pos + 4)))) end
    if d <= near then found = string.sub(bucket, pos, pos + 7); break end
  end
  if found then break end
end

if found then
  local first = redis.call('HGET', first_key, found)
  local count = redis.call('HINCRBY', hosts_key, host, 1)
  redis.call('EXPIRE', hosts_key, ttl)
  return {found, first or false, count}
end
for i = 1, nbands do
  redis.call('HSET', KEYS[i], ARGV[5 + i], (buckets[i] or '') .. fp)
  redis.call('EXPIRE', KEYS[i], ttl)
end
redis.call('HSETNX', first_key, fp, url)
redis.call('EXPIRE', first_key, ttl)
return {false, false, tonumber(redis.call('HGET', hosts_key, host) or '0')}
