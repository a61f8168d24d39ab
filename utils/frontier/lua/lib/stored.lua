-- lib/stored.lua: a crawl's stored requests (utils/frontier/crawl_request.py): one hash per crawl and
-- domain, the crawl's domain index, and the profiles of crawl-level fields its requests share.
--
-- A stored request is `<profile id> <curdepth> <priority> <attempt> <url>[\t<JSON of the rest>]`, or
-- an older Shoal's JSON object (opens with `{`). Its hash is K.crawl_requests(sid, appid, crawlid, d),
-- field the queue member without its crawl code (lib/member.lua).
--
-- st_put(sid, appid, crawlid, d, id, payload): store it; the domain joins the crawl's index.
-- st_get(sid, appid, crawlid, d, id) -> the stored request or false.
-- st_drop(sid, appid, crawlid, d, id): remove it; a domain with none left leaves the index.
-- st_profile_id(sid, appid, crawlid, json) -> the id of that profile JSON in the crawl's profiles
--   hash, handed out (hex counter) the first time; the same JSON always gets the same id.
-- st_fields(payload) -> profile id ('' = none; nil for an older Shoal's JSON), priority, attempt.
-- st_with_attempt(payload, n) -> the payload with its attempt set to n.

--! include keys
--! include member

local function st_put(sid, appid, crawlid, d, id, payload)
  redis.call('HSET', K.crawl_requests(sid, appid, crawlid, d), id, payload)
  redis.call('SADD', K.crawl_domains(sid, appid, crawlid), d)
end

local function st_get(sid, appid, crawlid, d, id)
  return redis.call('HGET', K.crawl_requests(sid, appid, crawlid, d), id)
end

local function st_drop(sid, appid, crawlid, d, id)
  local requests = K.crawl_requests(sid, appid, crawlid, d)
  redis.call('HDEL', requests, id)
  if redis.call('EXISTS', requests) == 0 then redis.call('SREM', K.crawl_domains(sid, appid, crawlid), d) end
end

local function st_profile_id(sid, appid, crawlid, json)
  local key = K.crawl_profiles(sid, appid, crawlid)
  local digest = '#' .. redis.sha1hex(json)
  local id = redis.call('HGET', key, digest)
  if not id then
    id = string.format('%x', redis.call('HINCRBY', key, '#', 1))
    redis.call('HSET', key, digest, id, id, json)
  end
  return id
end

local HEAD = '^(%S*) (%-?%d+) (%-?%d+) (%d+) '

-- An older Shoal's JSON: its fields, and the one top-level "attempt" in its text (or none).
local ATTEMPT = '"attempt"%s*:%s*%-?%d+'

local function st_fields(payload)
  if string.sub(payload, 1, 1) == '{' then
    local ok, req = pcall(cjson.decode, payload)
    if not ok or type(req) ~= 'table' then req = {} end
    return nil, tonumber(req.priority) or 1, tonumber(req.attempt) or 0, req.attempt ~= nil
  end
  local pid, _, priority, attempt = string.match(payload, HEAD)
  return pid or '', tonumber(priority) or 1, tonumber(attempt) or 0
end

-- An older Shoal's JSON keeps every byte but its attempt (cjson would turn [] into {} and round
-- numbers): the one "attempt" in the text is replaced when the decoded request has it (so it is the
-- top-level one); otherwise n is appended as the last key, which every JSON reader Shoal uses takes.
local function st_with_attempt(payload, n)
  local pid, _, _, has_top = st_fields(payload)
  if pid then
    local function set(p, depth, prio) return p .. ' ' .. depth .. ' ' .. prio .. ' ' .. n .. ' ' end
    return (string.gsub(payload, HEAD, set, 1))
  end
  local count = 0
  for _ in string.gmatch(payload, ATTEMPT) do count = count + 1 end
  if has_top and count == 1 then
    return (string.gsub(payload, ATTEMPT, '"attempt":' .. n, 1))
  end
  local body = string.match(payload, '^(.-)%s*}%s*$') or '{'
  if string.match(body, '^%s*{%s*$') then return '{"attempt":' .. n .. '}' end
  return body .. ',"attempt":' .. n .. '}'
end
