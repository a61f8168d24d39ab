-- lib/overrides.lua: a throttle override that changed applies at once (pop.lua's first pass).
--
-- ov_apply_changes(sid, overrides_json, last_json, now): when the overrides the caller sent
--   (`overrides_json`, {domain: [hits, window]}) differ from the ones the spider's pops last saw
--   (`last_json`, field `overrides` of <sid>:policy, nil = never), they are saved there, and every
--   domain whose override appeared, changed or went that is snoozed in the line is made due now
--   (same class, same carried throttle state): its new interval is looked at by this very pop
--   instead of at its old due time.

--! include keys
--! include domain_sets

local function ov_changed(now_set, before)
  local changed = {}
  for d, o in pairs(now_set) do
    local p = before[d]
    if not p or tonumber(p[1]) ~= tonumber(o[1]) or tonumber(p[2]) ~= tonumber(o[2]) then changed[d] = true end
  end
  for d in pairs(before) do if not now_set[d] then changed[d] = true end end
  return changed
end

local function ov_apply_changes(sid, overrides_json, last_json, now)
  if last_json == overrides_json then return end
  redis.call('HSET', K.policy(sid), 'overrides', overrides_json)
  local before = last_json and cjson.decode(last_json) or {}
  local line, line_of = K.line(sid), K.line_of(sid)
  for d in pairs(ov_changed(cjson.decode(overrides_json), before)) do
    local v = redis.call('HGET', line_of, d)
    local m = v and ds_member(v, d)
    local score = m and ds_due(m) > now and redis.call('ZSCORE', line, m)
    if score then
      redis.call('ZREM', line, m)
      ds_enter(sid, d, tonumber(score), now, now, ds_carried(v, d))
    end
  end
end
