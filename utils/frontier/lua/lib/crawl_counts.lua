-- lib/crawl_counts.lua: which crawl a queue member belongs to, and a call's progress counters,
-- written once per crawl and field at the end of the call.
--
-- cc_new(sid) -> a tally `cc` for one call of the spider `sid` (holds what it learnt: crawl names
--   read, counts not written yet); every other function takes it explicitly.
-- cc_crawl(cc, m) -> the crawl of the queue member `m` (its code, after its field (lib/member.lua), names
--   it in <sid>:crawl_names), as {name = `<appid>\t<crawlid>`, appid, crawlid, progress = its
--   counters hash}; nil when the crawl is gone. Reads <sid>:crawl_names once a code.
-- cc_count(cc, crawl, field, n): add n to the crawl's counter `field` (in memory).
-- cc_write(cc, ttl): HINCRBY every counted field, and the crawl's progress hash lives `ttl` s more.
-- cc_moved(progress, from, to, ttl, updated): at once, one request of the crawl whose progress
--   hash is `progress` moves from the counter `from` to `to`; stamped `updated` (unix s, nil =
--   not stamped); the hash lives `ttl` s more (the per-request scripts: retry, release).

--! include keys
--! include member

local function cc_new(sid)
  return {sid = sid, crawls = {}, counts = {}}
end

local function cc_crawl(cc, m)
  local code = qm_code(m)
  local crawl = cc.crawls[code]
  if crawl == nil then
    crawl = false
    local name = redis.call('HGET', K.crawl_names(cc.sid), code)
    if name then
      local tab = string.find(name, '\t', 1, true)
      local appid, crawlid = string.sub(name, 1, tab - 1), string.sub(name, tab + 1)
      crawl = {name = name, appid = appid, crawlid = crawlid, progress = K.crawl_progress(cc.sid, appid, crawlid)}
    end
    cc.crawls[code] = crawl
  end
  return crawl or nil
end

local function cc_count(cc, crawl, field, n)
  local c = cc.counts[crawl.progress]
  if not c then c = {}; cc.counts[crawl.progress] = c end
  c[field] = (c[field] or 0) + n
end

local function cc_write(cc, ttl)
  for progress, fields in pairs(cc.counts) do
    for field, n in pairs(fields) do redis.call('HINCRBY', progress, field, n) end
    redis.call('EXPIRE', progress, ttl)
  end
  cc.counts = {}
end

local function cc_moved(progress, from, to, ttl, updated)
  redis.call('HINCRBY', progress, from, -1)
  redis.call('HINCRBY', progress, to, 1)
  if updated then redis.call('HSET', progress, 'updated', updated) end
  redis.call('EXPIRE', progress, ttl)
end
