-- reap.lua: settle one spider's expired leases: back to their queue, or dead after RETRY_TIMES.
--
-- KEYS: none (single Redis node; keys follow utils/keys.py).
-- ARGV[1] spiderid   ARGV[2] most leases to settle   ARGV[3] RETRY_TIMES   ARGV[4] crawl state TTL (s)
-- A lease has expired when its deadline in <sid>:inflight (Redis server time) has passed: the
-- spider that took it died or hung. The stored request's "attempt" counts its retries so far:
-- below RETRY_TIMES the request goes back to its domain queue under its own id (it keeps its
-- place among equal priorities) with attempt + 1 (progress inflight - 1, queued + 1, reaped + 1);
-- at RETRY_TIMES it is dead: payload and index entry removed (progress inflight - 1, dead + 1),
-- and the caller writes its dead-letter record and failure page.
-- Returns 4 values per settled lease: 'requeued' or 'dead', domain, request id, and the stored
-- request JSON (as re-queued, or as it was when it died).

local sid, limit, retry_times, state_ttl = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local inflight = sid .. ':inflight'
local ATTEMPT = '"attempt"%s*:%s*%-?%d+'

-- The payload with its top-level "attempt" set to n, every other byte unchanged (cjson would
-- turn [] into {} and round numbers). The one "attempt" in the text is replaced when the decoded
-- request has it (so it is the top-level one); otherwise n is appended as the last key, which
-- every JSON reader Shoal uses (ujson, cjson, json) takes over an earlier duplicate.
local function with_attempt(payload, has_top, n)
  local count = 0
  for _ in string.gmatch(payload, ATTEMPT) do count = count + 1 end
  if has_top and count == 1 then
    return (string.gsub(payload, ATTEMPT, '"attempt":' .. n, 1))
  end
  local body = string.match(payload, '^(.-)%s*}%s*$') or '{'
  if string.match(body, '^%s*{%s*$') then return '{"attempt":' .. n .. '}' end
  return body .. ',"attempt":' .. n .. '}'
end

local function count(progress, field, n)
  if progress then redis.call('HINCRBY', progress, field, n) end
end

local out = {}
for _, entry in ipairs(redis.call('ZRANGEBYSCORE', inflight, '-inf', now, 'LIMIT', 0, limit)) do
  redis.call('ZREM', inflight, entry)
  local tab = string.find(entry, '\t', 1, true)
  local d, id = string.sub(entry, 1, (tab or 1) - 1), string.sub(entry, (tab or 0) + 1)
  local hash = sid .. ':' .. d .. ':requests'
  local payload = tab and redis.call('HGET', hash, id)
  if payload then
    local ok, req = pcall(cjson.decode, payload)
    if not ok or type(req) ~= 'table' then req = {} end
    local attempt = tonumber(req.attempt) or 0
    local progress
    if req.appid and req.crawlid then
      progress = sid .. ':crawl:' .. tostring(req.appid) .. ':' .. tostring(req.crawlid)
    end
    if attempt >= retry_times then
      redis.call('HDEL', hash, id)
      if progress then redis.call('SREM', progress .. ':index', entry) end
      if req.crawlid then  -- a request that ends without a page gives its page-limit slot back (as ack.lua)
        for _, key in ipairs({sid .. ':domain_max_page_filter:' .. d .. ':' .. tostring(req.crawlid),
                              sid .. ':global_page_count_filter:' .. d .. ':' .. tostring(req.crawlid)}) do
          if tonumber(redis.call('GET', key) or '0') > 0 then redis.call('DECR', key) end
        end
      end
      if progress then progress = progress .. ':progress' end
      count(progress, 'dead', 1)
      out[#out + 1] = 'dead'
    else
      payload = with_attempt(payload, req.attempt ~= nil, attempt + 1)
      redis.call('HSET', hash, id, payload)
      local score = -(tonumber(req.priority) or 1)
      redis.call('ZADD', sid .. ':' .. d .. ':queue', score, id)
      redis.call('ZADD', sid .. ':heads', 'LT', score, d)
      if progress then progress = progress .. ':progress' end
      count(progress, 'queued', 1)
      count(progress, 'reaped', 1)
      out[#out + 1] = 'requeued'
    end
    count(progress, 'inflight', -1)
    if progress then
      redis.call('HSET', progress, 'updated', tostring(now))
      redis.call('EXPIRE', progress, state_ttl)
    end
    out[#out + 1] = d
    out[#out + 1] = id
    out[#out + 1] = payload
  end
end
return out
