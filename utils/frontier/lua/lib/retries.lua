-- lib/retries.lua: requests waiting to retry go back into their queues once due (pop.lua's first
-- pass).
--
-- rt_promote_due(sid, cc, now, most): up to `most` entries of <sid>:delayed whose not-before time
--   has come leave it and go back into <sid>:<domain>:queue, scored by their stored (lowered)
--   priority read from its stored request (lib/stored.lua); the crawl's progress moves one from `retrying`
--   to `queued` (counted in the tally `cc`, lib/crawl_counts.lua); each domain touched is placed
--   in the line again (ds_place). An entry whose crawl or payload is gone is dropped.

--! include keys
--! include domain_sets
--! include crawl_counts
--! include stored

local function rt_promote_due(sid, cc, now, most)
  local delayed = K.delayed(sid)
  local due = redis.call('ZRANGEBYSCORE', delayed, '-inf', now, 'LIMIT', 0, most)
  local touched = {}
  for _, entry in ipairs(due) do
    redis.call('ZREM', delayed, entry)
    local tab = string.find(entry, '\t', 1, true)
    local d, m = string.sub(entry, 1, tab - 1), string.sub(entry, tab + 1)
    local crawl = cc_crawl(cc, m)
    local payload = crawl and st_get(sid, crawl.appid, crawl.crawlid, d, qm_field(m))
    if payload then
      local _, priority = st_fields(payload)
      touched[d] = true
      redis.call('ZADD', K.queue(sid, d), -priority, m)
      cc_count(cc, crawl, 'retrying', -1)
      cc_count(cc, crawl, 'queued', 1)
    end
  end
  for d in pairs(touched) do ds_place(sid, d, now) end
end
