-- lib/app_limits.lua: the lease-time quotas of apps (max_inflight, pages_per_minute; utils/apps/quotas.py),
-- checked by pop.lua where requests are leased. A crawl over its app's quota waits: its domain goes back
-- into the line until the app may lease again (as on a throttle); nothing is dropped.
--
-- <sid>:app_leases  HASH appid -> the app's requests leased from this shard and not settled: pop.lua adds
--                   (al_leased, al_write), the scripts that settle a lease take away (al_settled). Every app
--                   is counted, so a quota set later applies at once.
-- <sid>:app_pace    HASH appid -> the app's theoretical next lease time (unix s; GCRA): a lease is allowed
--                   while that is at most a minute ahead, so an app leases at most pages_per_minute in any
--                   minute, then one every 60 / pages_per_minute s.
-- The quotas come with each pop: JSON {appid: [max_inflight, pages_per_minute]} (-1 = none), this shard's
-- part of them, `\tdefault` for every app not named; '' or '{}' = no app limited, and the call reads
-- neither hash (utils/frontier/weights.py).
--
-- Slot shares: with the apps' weights given (JSON {appid: weight}, `\tdefault` for the others; '' = off),
-- an app whose share of this shard's leases in flight is above its weight's share among the apps with
-- leases in flight or with due domains seen by the call is over its share (al_over_share): pop.lua skips
-- its due domains until the class's other due domains were looked at, so when crawler slots are the
-- bottleneck they go to the apps by weight, and when they are not every due domain is still leased in
-- the same call.
-- On a Redis Cluster a shard holds a few of a crawler's slots, too few to share by weight alone (each app
-- would keep at least one per shard), its script may read no other shard's slot, and the shards of one
-- pop decide at once. So there the caller shares (utils/frontier/pop_planner.py): each pop hands back
-- its shard's counts (al_report), and the caller deals each round's leases out to the apps by weight
-- over the whole cluster and to the shards asked, and tells each shard its deal (JSON {appid: [n, rank]}:
-- the apps it knows to have leases in flight, with the leases dealt to them here, 0 for none, and the
-- order in which they would be dealt more; '' = one shard). An app dealt none here is over its share;
-- an app the caller knew nothing of gets one lease. When the skipped domains are leased after all (no
-- due domain of the apps dealt), the apps next in the deal's order go first (al_rank).
--
-- al_new(sid, json, now, weights, dealt) -> a call's state `al` (al.limited: some app has a quota;
-- al.sharing); al_report(al) -> this shard's counts as JSON, for a cluster's caller ('' otherwise), with
-- 0 for the apps whose due domains the call looked at and skipped;
-- al_rank(al, appid, i) -> where a domain skipped i-th goes among the skipped when they are leased;
-- al_wait(al, appid) -> 0 when the app may lease one more now, else seconds until it may;
-- al_leased(al, appid): count one lease; al_write(al): write the counts, once per app;
-- al_settled(sid, appid, n): n leases of the app were settled.

--! include keys

local AL_RECHECK = 0.5  -- seconds a domain waits when its app has its most requests in flight
local AL_MINUTE = 60

local function al_new(sid, json, now, weights, dealt)
  local limits = (json and json ~= '' and json ~= '{}') and cjson.decode(json) or {}
  local al = {sid = sid, now = now, limits = limits, limited = next(limits) ~= nil, count = {}, added = {}, pace = {},
              sharing = weights ~= nil and weights ~= '', total = 0, seen = {}}
  if al.sharing then  -- every app's leases in flight, read once: a few fields, one per app
    al.weights = cjson.decode(weights)
    if dealt and dealt ~= '' then al.dealt = cjson.decode(dealt) end
    local all = redis.call('HGETALL', K.app_leases(sid))
    for i = 1, #all, 2 do
      local n = math.max(0, tonumber(all[i + 1]))
      al.count[all[i]] = n
      al.total = al.total + n
    end
  end
  return al
end

local function al_count(al, appid)
  local n = al.count[appid]
  if n == nil and al.sharing then return 0 end  -- read whole: an app not in the hash has none
  if n == nil then
    n = math.max(0, tonumber(redis.call('HGET', K.app_leases(al.sid), appid) or '0'))
    al.count[appid] = n
  end
  return n
end

local function al_tat(al, appid)
  local t = al.pace[appid]
  if t == nil then
    t = tonumber(redis.call('HGET', K.app_pace(al.sid), appid) or '0')
    al.pace[appid] = t
  end
  return t
end

local function al_limit(al, appid)
  return al.limits[appid] or al.limits['\tdefault']  -- an app's own entry replaces the default whole
end

local function al_wait(al, appid)
  local lim = al_limit(al, appid)
  if not lim then return 0 end
  local most, per_minute = tonumber(lim[1]), tonumber(lim[2])
  if most >= 0 and al_count(al, appid) >= most then return AL_RECHECK end
  if per_minute == 0 then return AL_MINUTE end
  if per_minute > 0 then
    local ahead = math.max(al_tat(al, appid), al.now) + AL_MINUTE / per_minute - al.now
    if ahead > AL_MINUTE then return ahead - AL_MINUTE end
  end
  return 0
end

local function al_weight(al, appid)
  return tonumber(al.weights[appid] or al.weights['\tdefault'] or 1)
end

local function al_dealt(al, appid)  -- leases left in the deal; one for an app not in it
  local deal = al.dealt[appid]
  return deal and tonumber(deal[1]) or 1
end

local function al_rank(al, appid, i)
  local deal = al.dealt and al.dealt[appid]
  return (deal and tonumber(deal[2]) or 0) * 100000 + i  -- the line's order within an app
end

local function al_over_share(al, appid)
  if not al.sharing then return false end
  if al.dealt then return al_dealt(al, appid) <= 0 end
  al.seen[appid] = true
  local mine = al_count(al, appid)
  if mine == 0 then return false end
  local active = 0  -- the weights of the apps with leases in flight or due work seen by this call
  for app, n in pairs(al.count) do
    if n > 0 or al.seen[app] then active = active + al_weight(al, app) end
  end
  for app in pairs(al.seen) do
    if al.count[app] == nil then active = active + al_weight(al, app) end
  end
  return mine / al.total > al_weight(al, appid) / active
end

local function al_leased(al, appid)
  if al.limited or al.sharing then
    al.count[appid] = al_count(al, appid) + 1
    al.total = al.total + 1
  end
  al.added[appid] = (al.added[appid] or 0) + 1
  if al.dealt then al.dealt[appid] = {al_dealt(al, appid) - 1, (al.dealt[appid] or {})[2]} end
  local lim = al_limit(al, appid)
  if lim and tonumber(lim[2]) > 0 then
    al.pace[appid] = math.max(al_tat(al, appid), al.now) + AL_MINUTE / tonumber(lim[2])
  end
end

local function al_write(al)
  for appid, n in pairs(al.added) do redis.call('HINCRBY', K.app_leases(al.sid), appid, n) end
  for appid, t in pairs(al.pace) do redis.call('HSET', K.app_pace(al.sid), appid, string.format('%.6f', t)) end
  al.added, al.pace = {}, {}
end

local function al_report(al)
  if not al.dealt then return '' end
  local held = {}
  for app, n in pairs(al.count) do
    if n > 0 then held[app] = n end
  end
  for app in pairs(al.seen) do held[app] = held[app] or 0 end  -- due here, skipped: the caller deals there
  return next(held) and cjson.encode(held) or '{}'
end

local function al_settled(sid, appid, n)
  if n > 0 then redis.call('HINCRBY', K.app_leases(sid), appid, -n) end
end
