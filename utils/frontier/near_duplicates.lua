-- Look a page's SimHash up in its app's near-duplicate index, and add it when nothing is near.
-- KEYS[1..4] band HASHes (field: 2-byte band value, value: packed 8-byte SimHashes)
-- KEYS[5] first-URL HASH (8-byte SimHash -> URL), KEYS[6] the crawl's per-host near-duplicate counts
-- ARGV[1] SimHash (8 bytes, big-endian), ARGV[2] URL, ARGV[3] host, ARGV[4] TTL (s), ARGV[5] near (bits)
-- Returns {nearest SimHash or false, its first URL or false, host's near-duplicates in this crawl}.
-- Bands: bytes 1-2, 3-4, 5-6, 7-8 of the SimHash; within `near` <= 3 bits two SimHashes share one.
local fp, url, host = ARGV[1], ARGV[2], ARGV[3]
local ttl, near = tonumber(ARGV[4]), tonumber(ARGV[5])
local a_hi, a_lo = (struct.unpack('>I4', fp, 1)), (struct.unpack('>I4', fp, 5))  -- (): the value, not its end

local function bits(x)
  local n = 0
  while x ~= 0 do x = bit.band(x, x - 1); n = n + 1 end
  return n
end

local found = nil
local buckets = {}
for i = 1, 4 do
  local field = string.sub(fp, 2 * i - 1, 2 * i)
  local bucket = redis.call('HGET', KEYS[i], field) or ''
  buckets[i] = {field, bucket}
  for pos = 1, #bucket - 7, 8 do
    local other = string.sub(bucket, pos, pos + 7)
    local d = bits(bit.bxor(a_hi, (struct.unpack('>I4', other, 1))))
    if d <= near then d = d + bits(bit.bxor(a_lo, (struct.unpack('>I4', other, 5)))) end
    if d <= near then found = other; break end
  end
  if found then break end
end

if found then
  local first = redis.call('HGET', KEYS[5], found)
  local count = redis.call('HINCRBY', KEYS[6], host, 1)
  redis.call('EXPIRE', KEYS[6], ttl)
  return {found, first or false, count}
end
for i = 1, 4 do
  redis.call('HSET', KEYS[i], buckets[i][1], buckets[i][2] .. fp)
  redis.call('EXPIRE', KEYS[i], ttl)
end
redis.call('HSETNX', KEYS[5], fp, url)
redis.call('EXPIRE', KEYS[5], ttl)
return {false, false, tonumber(redis.call('HGET', KEYS[6], host) or '0')}
