-- One event on a domain's block escalation ladder (issue 33), atomically for every crawler.
-- KEYS[1] ladder state HASH, KEYS[2] detections ZSET, KEYS[3] history LIST, KEYS[4] ladder domains ZSET
-- ARGV[1] event: detect | clean | set
-- ARGV[2] now (unix s), ARGV[3] domain, ARGV[4] reason, ARGV[5] by (process or "hand")
-- ARGV[6] rungs, comma-separated ascending levels the domain may use (0 first)
-- ARGV[7] up_after (detections), ARGV[8] window (s), ARGV[9] down_after (clean pages in a row)
-- ARGV[10] history length, ARGV[11] level to set (set) or clean pages seen (clean), ARGV[12] state TTL (s)
-- Returns {level after, level before}. Level 4 (paused) only leaves by hand: nothing is fetched there.
local state, hits, history, domains = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local event, now, domain, reason, by = ARGV[1], tonumber(ARGV[2]), ARGV[3], ARGV[4], ARGV[5]
local up_after, window, down_after = tonumber(ARGV[7]), tonumber(ARGV[8]), tonumber(ARGV[9])
local rungs = {}
for rung in string.gmatch(ARGV[6], '%d+') do rungs[#rungs + 1] = tonumber(rung) end
local level = tonumber(redis.call('HGET', state, 'level') or '0')
local new = level

if event == 'detect' then
  redis.call('ZADD', hits, now, ARGV[2] .. ':' .. by .. ':' .. reason)
  redis.call('ZREMRANGEBYSCORE', hits, '-inf', now - window)
  redis.call('HSET', state, 'clean', 0)
  redis.call('HINCRBY', state, 'detections', 1)
  if redis.call('ZCARD', hits) >= up_after then
    for _, rung in ipairs(rungs) do
      if rung > level then new = rung; break end
    end
  end
elseif event == 'clean' then
  if level > 0 and level < 4 then
    if redis.call('HINCRBY', state, 'clean', tonumber(ARGV[11])) >= down_after then
      new = 0
      for _, rung in ipairs(rungs) do
        if rung < level then new = rung end
      end
    end
  end
elseif event == 'set' then
  new = tonumber(ARGV[11])
end

if new ~= level or event == 'set' then
  redis.call('HSET', state, 'level', new, 'since', ARGV[2], 'reason', reason, 'by', by, 'clean', 0)
  redis.call('DEL', hits)
  redis.call('LPUSH', history, cjson.encode({at = now, from = level, to = new, reason = reason, by = by}))
  redis.call('LTRIM', history, 0, tonumber(ARGV[10]) - 1)
  redis.call('ZADD', domains, new, domain)
end
local ttl = tonumber(ARGV[12])
for _, key in ipairs({state, hits, history}) do
  if redis.call('EXISTS', key) == 1 then redis.call('EXPIRE', key, ttl) end
end
return {new, level}
