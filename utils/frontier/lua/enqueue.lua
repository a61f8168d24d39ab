-- enqueue.lua: queue crawl requests through the per-crawl filters, in one atomic call.
--
-- KEYS[1]: any key of the frontier shard, for routing (utils/frontier/shards.py). Keys are derived from ARGV
--       with the layout of utils/frontier/keys.py; on a Redis Cluster each spiderid comes prefixed with its
--       shard's hash tag (`{3.48}link`), so every key of a call lives in that shard's slot. The
--       registries `shoal:spiders` and `shoal:crawls` are written by the caller.
-- ARGV[1] dupefilter idle TTL (s)       ARGV[2] crawl state idle TTL (s)
-- ARGV[3] domain page counter TTL (s)   ARGV[4] global page limit per crawl and domain (0 = none)
-- ARGV[5] global page counter TTL (s)   ARGV[6] default dupefilter mode: 'auto', 'exact' or 'bloom'
-- ARGV[7] Bloom filter size (bits)      ARGV[8] Bloom filter hash functions (mode bloom)
-- ARGV[9] the batch's time in µs ('' = this server's): with several shards, one batch's calls run on
--         different masters at once, so the caller's clock and each request's place in its batch
--         keep FIFO across shards
-- ARGV[10] mode auto: fingerprints a crawl keeps exactly before its Bloom stages (lib/seen.lua)
-- ARGV[11] mode auto: the highest chance that a new URL is dropped as seen (false drop)
-- ARGV[12] the disk tier's window: most requests a domain keeps in Redis (0 = no disk tier; lib/tier.lua)
-- ARGV[13] how many profiles follow (P), then ARGV[14 .. 13 + P] the profiles: the JSON of crawl-level
--         fields the call's requests share (utils/frontier/crawl_request.py), each stored once per crawl
-- then one group of 17 values per request:
--   spiderid, domain, priority, appid, crawlid,
--   fingerprint (8 binary bytes; '' = not filtered), domain_max_pages ('0' = none),
--   is_seed ('1' = never filtered as duplicate, stopped or expired; still recorded in the dupefilter),
--   offset marks key ('' = none) and mark `<offset>:<message fingerprint>`: skip the request only
--   if that very message was already written at that offset (a reset log, a recreated topic or
--   another cluster has other messages there: they are queued). Marks more than MARK_WINDOW
--   offsets below the newest are trimmed (a replay that far back is queued again: duplicates,
--   never a loss); the key expires after the crawl state TTL without writes.
--   payload (the stored request JSON), expires (unix s, '0' = never),
--   dupefilter mode ('' = ARGV[6]), drop reason decided by the caller ('' = none, e.g. 'blacklist'),
--   the request's place in its batch, its profile (1..P; 0 = none: the payload is stored as given),
--   its crawl's weight (> 0; lib/fair.lua), recorded in the crawl's progress as `weight`.
-- Returns one status per request: queued | duplicate | page_limit | blacklist | expired | replayed.
-- A queue member (lib/member.lua) is its crawl's virtual finish tag on the domain (lib/fair.lua), so
-- that equal priorities are served fairly between crawls by weight, the request id, 16 hex digits
-- (batch time in µs + place in batch), so that a crawl's own come out oldest first, then its
-- crawl's code; the payload lives in the crawl's requests hash of its domain under the member
-- without its code, the profile's id written in front (lib/stored.lua); the crawl's domain index
-- and those hashes are the crawl's index for info and stop.
-- The page counters count admitted requests; ack.lua gives the slot back when an admitted request
-- ends without a page, so domain_max_pages = N yields N crawled pages.
-- Each domain that gains a request enters <sid>:ready (lib/domain_sets.lua) unless it is snoozed;
-- a spider that gains one gets a wake-up token for its idle crawlers (lib/wake.lua).

--! include domain_sets
--! include wake
--! include stored
--! include seen
--! include tier
--! include fair

local NF = 17
local FIRST_PROFILE = 14
local window = tonumber(ARGV[12])
local MARK_WINDOW = 20000  -- offsets; far more than a monitor writes ahead of its commits (2 polls)
local marked = {}  -- offset marks key -> newest offset marked by this call, trimmed at the end
local dupe_ttl, state_ttl, page_ttl = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local global_limit, global_ttl = tonumber(ARGV[4]), tonumber(ARGV[5])
local default_mode, bloom_bits, bloom_hashes = ARGV[6], tonumber(ARGV[7]), tonumber(ARGV[8])
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local base_us = tonumber(ARGV[9]) or (tonumber(t[1]) * 1000000 + tonumber(t[2]))
local out = {}
local touched = {}
local seen = sn_new(tonumber(ARGV[10]), tonumber(ARGV[11]), dupe_ttl)
local fair = fq_new()
local weighed = {}  -- progress key -> the weight this call recorded

local function bump(progress, field, n)
  redis.call('HINCRBY', progress, field, n)
  redis.call('EXPIRE', progress, state_ttl)
end

local function under_limit(key, limit, ttl)
  local n = tonumber(redis.call('GET', key) or '0')
  redis.call('EXPIRE', key, ttl)
  if n >= limit then return false end
  redis.call('INCR', key)
  redis.call('EXPIRE', key, ttl)
  return true
end

-- Bloom filter over a bitmap: double hashing of the fingerprint's two 32-bit halves (the size is
-- a prime, so every probe sequence visits distinct bits). True when the fingerprint was new.
-- The bitmap is created at its full size at once: grown bit by bit, Redis would over-allocate it
-- (strings under 1 MB double their allocation), costing twice the memory.
local sized = {}
local function bloom_add(key, fp)
  if not sized[key] then
    if redis.call('EXISTS', key) == 0 then redis.call('SETBIT', key, bloom_bits - 1, 0) end
    sized[key] = true
  end
  local b1, b2, b3, b4, b5, b6, b7, b8 = string.byte(fp, 1, 8)
  local h1 = ((b1 * 256 + b2) * 256 + b3) * 256 + b4
  local h2 = (((b5 * 256 + b6) * 256 + b7) * 256 + (b8 or 0)) % bloom_bits
  if h2 == 0 then h2 = 1 end
  local new = false
  for i = 0, bloom_hashes - 1 do
    if redis.call('SETBIT', key, (h1 + i * h2) % bloom_bits, 1) == 0 then new = true end
  end
  redis.call('EXPIRE', key, dupe_ttl)
  return new
end

local function seen_before(sid, crawlid, fp, mode)
  if mode == '' then mode = default_mode end
  local df = K.dupefilter(sid, crawlid)
  if mode == 'bloom' then return not bloom_add(K.bloom_dupefilter(sid, crawlid), fp) end
  if mode == 'auto' then return sn_seen(seen, sid, crawlid, fp) end
  local added = redis.call('SADD', df, fp)
  redis.call('EXPIRE', df, dupe_ttl)
  return added == 0
end

local function filter(i)
  local sid, domain, appid, crawlid = ARGV[i], ARGV[i + 1], ARGV[i + 3], ARGV[i + 4]
  local fp, maxp, seed, okey, ooff = ARGV[i + 5], ARGV[i + 6], ARGV[i + 7], ARGV[i + 8], ARGV[i + 9]
  local expires, mode, drop = tonumber(ARGV[i + 11]), ARGV[i + 12], ARGV[i + 13]
  if okey ~= '' and redis.call('ZSCORE', okey, ooff) then return 'replayed' end
  if drop ~= '' then return drop end
  if seed ~= '1' then
    local until_ = redis.call('ZSCORE', K.stopped(sid), appid .. '||' .. crawlid)
    if until_ and tonumber(until_) > now then return 'blacklist' end
    if expires > 0 and expires <= now then return 'expired' end
  end
  if fp ~= '' and seen_before(sid, crawlid, fp, mode) and seed ~= '1' then return 'duplicate' end
  if tonumber(maxp) > 0 and not under_limit(K.domain_pages(sid, domain, crawlid),
                                            tonumber(maxp), page_ttl) then
    return 'page_limit'
  end
  if global_limit > 0 and not under_limit(K.global_pages(sid, domain, crawlid),
                                          global_limit, global_ttl) then
    return 'page_limit'
  end
  return 'queued'
end

-- A crawl's code: a few hex digits, handed out once per spider and crawl, that queue members
-- carry to name the crawl whose requests hash holds their payload.
local codes = {}
local function crawl_code(sid, appid, crawlid)
  local name = appid .. '\t' .. crawlid
  local cached = codes[sid .. '\t' .. name]
  if cached then return cached end
  local code = redis.call('HGET', K.crawl_codes(sid), name)
  if not code then
    code = string.format('%x', redis.call('HINCRBY', K.crawl_codes(sid), '\tseq', 1))
    redis.call('HSET', K.crawl_codes(sid), name, code)
    redis.call('HSET', K.crawl_names(sid), code, name)
  end
  codes[sid .. '\t' .. name] = code
  return code
end

-- The id of the call's profile `n` in the crawl, handed out once per call and crawl.
local profile_ids = {}
local function profile_of(sid, appid, crawlid, n)
  local cache_key = sid .. '\t' .. appid .. '\t' .. crawlid .. '\t' .. n
  local id = profile_ids[cache_key]
  if not id then
    id = st_profile_id(sid, appid, crawlid, ARGV[FIRST_PROFILE - 1 + n])
    profile_ids[cache_key] = id
  end
  return id
end

local function push(sid, domain, prio, appid, crawlid, payload, place, profile, weight)
  local queue = K.queue(sid, domain)
  local code = crawl_code(sid, appid, crawlid)
  local score = -tonumber(prio)
  touched[sid .. '\t' .. domain] = {sid, domain}
  local tag = fq_tag(fair, sid, domain, score, code, weight)
  local m
  local n = tonumber(place)
  repeat
    m = qm_make(tag, string.format('%013x%03x', base_us + math.floor(n / 4096), n % 4096), code)
    n = n + 4096  -- taken (another batch of the same µs): the next µs
  until redis.call('ZADD', queue, 'NX', score, m) == 1
  if profile > 0 then payload = profile_of(sid, appid, crawlid, profile) .. payload end
  if window > 0 and tr_admit(sid, domain, queue, m, score, payload, window) then return end
  st_put(sid, appid, crawlid, domain, qm_field(m), payload)
end

for i = FIRST_PROFILE + tonumber(ARGV[FIRST_PROFILE - 1]), #ARGV, NF do
  local sid, domain, prio, appid, crawlid = ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3], ARGV[i + 4]
  local status = filter(i)
  local progress = K.crawl_progress(sid, appid, crawlid)
  if status == 'queued' then
    local weight = tonumber(ARGV[i + 16])
    if not weight or weight <= 0 then weight = 1 end
    push(sid, domain, prio, appid, crawlid, ARGV[i + 10], ARGV[i + 14], tonumber(ARGV[i + 15]), weight)
    if weighed[progress] ~= weight then
      weighed[progress] = weight
      redis.call('HSET', progress, 'weight', tostring(weight))
    end
    bump(progress, 'queued', 1)
    redis.call('HDEL', progress, 'finished')  -- new work: a finished crawl is announced again when done
    bump(progress, 'enqueued', 1)
    if redis.call('HSETNX', progress, 'started', tostring(now)) == 1 then
      redis.call('HSET', progress, 'spiderid', (string.gsub(sid, '^{[^}]*}', '')), 'appid', appid, 'crawlid', crawlid)
    end
  elseif status ~= 'replayed' then
    bump(progress, 'dropped_' .. status, 1)
  end
  -- The offset is marked once its request is written: a request Redis refuses half-way (a key of the
  -- wrong type) is not taken for a replay when the kafka monitor writes it alone to find it.
  if status ~= 'replayed' and ARGV[i + 8] ~= '' then
    local okey, ooff = ARGV[i + 8], ARGV[i + 9]
    local offset = tonumber(string.match(ooff, '^%-?%d+'))
    redis.call('ZADD', okey, offset, ooff)
    if (marked[okey] or offset) <= offset then marked[okey] = offset end
  end
  out[#out + 1] = status
end
sn_flush(seen)
fq_write(fair)
local woken = {}
for _, sd in pairs(touched) do
  ds_place(sd[1], sd[2], now)
  if not woken[sd[1]] then woken[sd[1]] = true; wk_wake(sd[1]) end
end
for okey, newest in pairs(marked) do
  redis.call('ZREMRANGEBYSCORE', okey, '-inf', '(' .. (newest - MARK_WINDOW))
  redis.call('EXPIRE', okey, state_ttl)
end
return out
