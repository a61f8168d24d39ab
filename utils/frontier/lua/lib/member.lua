-- lib/member.lua: the parts of a queue member (utils/frontier/crawl_request.py says the same in Python).
--
-- A member is its stored request's field in the crawl's requests hash of its domain, then its
-- crawl's code (hex, <sid>:crawl_names):
--   `v<12 hex: the crawl's virtual finish tag on the domain><16 hex: request id><code>`  (lib/fair.lua)
--   `<16 hex: request id><code>`  (queued by an older Shoal; sorts before every tagged member)
-- The request id is 13 hex digits of the time it was first queued (µs) and a 3-digit counter. Within
-- a score (one priority), members sort by tag, so the ZSET's (score, member) order is the order of
-- service: strict priority first, fair queuing between crawls inside it.
--
-- qm_field(m) -> its field in the requests hash (member without the code); qm_code(m) -> the code;
-- qm_tag(m) -> its virtual finish tag (a number), nil for an untagged member; qm_make(tag, id, code).

local QM_MARK = 118  -- 'v': a tagged member (never a hex digit)
local QM_FIELD = 29  -- 'v' + 12 + 16 characters
local QM_ID = 16
local QM_TAG_MAX = 16 ^ 12 - 1

local function qm_field(m)
  if string.byte(m, 1) == QM_MARK then return string.sub(m, 1, QM_FIELD) end
  return string.sub(m, 1, QM_ID)
end

local function qm_code(m)
  if string.byte(m, 1) == QM_MARK then return string.sub(m, QM_FIELD + 1) end
  return string.sub(m, QM_ID + 1)
end

local function qm_tag(m)
  if string.byte(m, 1) ~= QM_MARK then return nil end
  return tonumber(string.sub(m, 2, 13), 16)
end

local function qm_make(tag, id, code)
  return string.format('v%012x', math.min(tag, QM_TAG_MAX)) .. id .. code
end
