-- lib/seen.lua: a crawl's self-sizing dupefilter (DUPEFILTER_MODE auto): exact while small, then Bloom.
--
-- A crawl's fingerprints go into its exact set K.dupefilter (8 bytes each, ~55 B of Redis) until it
-- holds `exact_max`; later ones go into Bloom stages K.dupefilter_stage(sid, crawlid, i), stage i
-- holding exact_max * 2^i URLs (at most STAGE_MAX) at a false-positive rate of rate / 2^(i+2), so a
-- new URL is taken for a seen one with a probability below `rate` / 2 however many stages there are,
-- a margin for double hashing and rounded hash counts (measured: ~8 % above the textbook rate) (a
-- scalable Bloom filter, Almeida et al. 2007; ~5.3 B per URL at 100,000,000 URLs and 1e-6). The
-- exact set is kept and still checked. K.dupefilter_stages holds `n` (stages), `a` (URLs in the
-- newest) and each stage's `m<i>` (bits, a prime), `k<i>` (hash functions) and `c<i>` (capacity); every key expires
-- `ttl` s after its crawl's last enqueue. utils/frontier/fingerprint.py (stage_shape) has the same shapes.
--
-- sn_new(exact_max, rate, ttl) -> the state of one call (what it read of each crawl, cached).
-- sn_seen(sn, sid, crawlid, fp) -> true when `fp` (8 bytes) was seen before; else records it, false.
-- sn_flush(sn): write what the call counted (`a` of each crawl it added to); once, at its end.

--! include keys

local STAGE_MAX = 64000000
local LN2 = math.log(2)

local function sn_prime(n)
  local c = n
  if c % 2 == 0 then c = c + 1 end
  while true do
    local prime, d = true, 3
    while d * d <= c do
      if c % d == 0 then prime = false; break end
      d = d + 2
    end
    if prime then return c end
    c = c + 2
  end
end

local function sn_cap(exact_max, i)
  return math.min(exact_max * 2 ^ i, STAGE_MAX)
end

-- As utils/frontier/fingerprint.py's stage_shape and bloom_size (once per stage: the prime costs ~ms).
local function sn_shape(exact_max, rate, i)
  local cap = sn_cap(exact_max, i)
  local bits = math.ceil(-cap * math.log(rate / 2 ^ (i + 2)) / (LN2 * LN2))
  local hashes = math.max(1, math.floor(bits / cap * LN2 + 0.5))
  return sn_prime(math.max(bits, 3)), hashes, cap
end

local function sn_new(exact_max, rate, ttl)
  return {exact_max = exact_max, rate = rate, ttl = ttl, crawls = {}}
end

-- What one call knows of a crawl's dupefilter: its keys, stages and counts, read once.
local function sn_crawl(sn, sid, crawlid)
  local id = sid .. '\t' .. crawlid
  local c = sn.crawls[id]
  if c then return c end
  local exact, state = K.dupefilter(sid, crawlid), K.dupefilter_stages(sid, crawlid)
  local flat = redis.call('HGETALL', state)
  local h = {}
  for j = 1, #flat, 2 do h[flat[j]] = tonumber(flat[j + 1]) end
  c = {sid = sid, crawlid = crawlid, exact = exact, state = state, n = h.n or 0, a = h.a or 0,
       m = {}, k = {}, stage = {}, size = redis.call('SCARD', exact)}
  for i = 0, c.n - 1 do
    c.m[i], c.k[i], c.stage[i] = h['m' .. i], h['k' .. i], K.dupefilter_stage(sid, crawlid, i)
  end
  sn.crawls[id] = c
  return c
end

-- The k bit offsets of `fp` in a stage of m bits: double hashing of the fingerprint's two 32-bit
-- halves (m is prime: the k probes are distinct).
local function sn_offsets(fp, m, k)
  local b1, b2, b3, b4, b5, b6, b7, b8 = string.byte(fp, 1, 8)
  local h1 = ((b1 * 256 + b2) * 256 + b3) * 256 + b4
  local h2 = (((b5 * 256 + b6) * 256 + b7) * 256 + (b8 or 0)) % m
  if h2 == 0 then h2 = 1 end
  local offsets = {}
  for j = 0, k - 1 do offsets[j + 1] = (h1 + j * h2) % m end
  return offsets
end

-- A new URL usually meets a 0 within the first probes (a stage is at most half set): those are read
-- one by one, the rest (a URL probably seen) with one BITFIELD.
local FIRST = 1
local function sn_in_stage(c, i, fp)
  local offsets = sn_offsets(fp, c.m[i], c.k[i])
  for j = 1, FIRST do
    if redis.call('GETBIT', c.stage[i], offsets[j]) == 0 then return false end
  end
  local args = {}
  for j = FIRST + 1, #offsets do
    args[#args + 1] = 'GET'; args[#args + 1] = 'u1'; args[#args + 1] = offsets[j]
  end
  if #args == 0 then return true end
  for _, bit in ipairs(redis.call('BITFIELD', c.stage[i], unpack(args))) do
    if bit == 0 then return false end
  end
  return true
end

local function sn_add(c, i, fp)
  local args = {}
  for _, off in ipairs(sn_offsets(fp, c.m[i], c.k[i])) do
    args[#args + 1] = 'SET'; args[#args + 1] = 'u1'; args[#args + 1] = off; args[#args + 1] = 1
  end
  redis.call('BITFIELD', c.stage[i], unpack(args))
end

-- A new stage, allocated at its full size at once (grown bit by bit, Redis would over-allocate it).
local function sn_open_stage(sn, c)
  local i = c.n
  local m, k, cap = sn_shape(sn.exact_max, sn.rate, i)
  c.m[i], c.k[i], c.stage[i] = m, k, K.dupefilter_stage(c.sid, c.crawlid, i)
  redis.call('SETBIT', c.stage[i], m - 1, 0)
  redis.call('EXPIRE', c.stage[i], sn.ttl)
  c.n, c.a = i + 1, 0
  redis.call('HSET', c.state, 'n', c.n, 'a', 0, 'm' .. i, m, 'k' .. i, k, 'c' .. i, cap)
  redis.call('EXPIRE', c.state, sn.ttl)
end

local function sn_seen(sn, sid, crawlid, fp)
  local c = sn_crawl(sn, sid, crawlid)
  if c.n == 0 and c.size < sn.exact_max then
    if redis.call('SADD', c.exact, fp) == 0 then return true end
    c.size = c.size + 1
    return false
  end
  if redis.call('SISMEMBER', c.exact, fp) == 1 then return true end
  for i = c.n - 1, 0, -1 do
    if sn_in_stage(c, i, fp) then return true end
  end
  if c.n == 0 or c.a >= sn_cap(sn.exact_max, c.n - 1) then sn_open_stage(sn, c) end
  sn_add(c, c.n - 1, fp)
  c.a, c.dirty = c.a + 1, true
  return false
end

-- The idle expiries are renewed here, after the call's writes: an EXPIRE is no write that a full Redis
-- refuses, so one before them would let the script write past its maxmemory (Redis refuses only a
-- script's first write when it is out of memory).
local function sn_flush(sn)
  for _, c in pairs(sn.crawls) do
    if c.dirty then redis.call('HSET', c.state, 'a', c.a) end
    c.dirty = false
    redis.call('EXPIRE', c.exact, sn.ttl)
    if c.n > 0 then redis.call('EXPIRE', c.state, sn.ttl) end
    for i = 0, c.n - 1 do redis.call('EXPIRE', c.stage[i], sn.ttl) end
  end
end
