-- lib/throttle_state.lua: the packed throttle state of a domain and the hash of a prefix's states;
-- pasted into the scripts that touch a throttle's state (`--! include`).
--
-- A throttle key is `<P><domain>`, P its prefix ('', '<spider>:', '<ip>:' or '<spider>:<ip>:',
-- after the shard's hash tag). The state of every domain under one prefix is one HASH,
-- `<P>throttles`: domain -> its state, so a pop reads the states of a whole batch of domains with
-- one command and writes them with one. A state is binary, big-endian doubles packed and unpacked
-- with one call of Redis's `struct` library (text stamps cost more Lua time than the rest of a
-- lease's throttle work):
--   exp          until when the state matters (unix s); pops sweep states past it (th_sweep)
--   slot         the moderated slot (unix s): the next hit may come one interval after it
--   pause        a not-before time (unix s): Retry-After answers, robots.txt Crawl-delay spacing
--   delay_until  until when `delay` holds (unix s)
--   delay        seconds between two hits (robots.txt Crawl-delay)
--   hits...      the times of the latest hits, oldest first, at most the throttle's hits per
--                window of them: the window is full while the oldest of them is inside it
-- The hash's field '' holds when the hash itself expires (a packed time). Writers push it, well
-- ahead, when a state must outlive it, so the states of a cluster that stopped crawling go away
-- on their own.
-- Under a spider's own prefix `<sid>:` (the default keys), a domain in the spider's line carries
-- its state in its line_of value instead (lib/domain_sets.lua), and leaves it here (th_park) when
-- it leaves the line.

--! include keys

local TH_HEAD = '>ddddd'  -- exp, slot, pause, delay_until, delay
local TH_HEAD_SIZE = 40
local TH_WIDTH = 8  -- one hit

-- The hash of a throttle key's prefix (K.throttles).
local function th_hash(prefix)
  return K.throttles(prefix)
end

-- The prefix of a hash of states.
local function th_prefix(hash)
  return string.sub(hash, 1, #hash - #'throttles')
end

-- exp, slot, pause, delay_until, delay and the hits of a state ('' = none).
local function th_unpack(state)
  if state == '' then return 0, 0, 0, 0, 0, '' end
  local exp, slot, pause, delay_until, delay = struct.unpack(TH_HEAD, state)
  return exp, slot, pause, delay_until, delay, string.sub(state, TH_HEAD_SIZE + 1)
end

local function th_pack(exp, slot, pause, delay_until, delay, hits)
  return struct.pack(TH_HEAD, exp, slot, pause, delay_until, delay) .. hits
end

-- A state as a table of named fields (exp, slot, pause, delay_until, delay, hits), for the
-- writers of one domain's state (lib/domain_sets.lua ds_state_find / ds_state_keep).
local function th_decode(state)
  local exp, slot, pause, delay_until, delay, hits = th_unpack(state)
  return {exp = exp, slot = slot, pause = pause, delay_until = delay_until, delay = delay, hits = hits}
end

-- The time of the i-th hit (0-based) of a state's hits; a hit as stored.
local function th_hit(hits, i)
  return (struct.unpack('>d', hits, i * TH_WIDTH + 1))
end
local function th_time(at)
  return struct.pack('>d', at)
end

-- Until when a state matters (its `exp`).
local function th_exp(state)
  return (struct.unpack('>d', state))
end

-- When the hash expires, from its field '' as read (false = not set).
local function th_hash_exp(field)
  return field and (struct.unpack('>d', field)) or 0
end

-- Write `fields` (domain, state, ...) into the hash `hash`, which expires at `hash_exp`; `need`
-- is the latest `exp` among them. A hash that must live longer is kept until `ahead` when that
-- is later, so that it is not extended at every write. Returns when the hash expires now.
local function th_write(hash, fields, hash_exp, need, ahead)
  if #fields == 0 then return hash_exp end
  local keep = nil
  if need > hash_exp then
    keep = math.max(need, ahead or need)
    fields[#fields + 1] = ''
    fields[#fields + 1] = th_time(keep)
  end
  redis.call('HSET', hash, unpack(fields))
  if not keep then return hash_exp end
  -- GT: a writer whose read of the expiry is older than another's push (a pop that parked a state
  -- through ds_leave after reading the hash) never pulls the hash's expiry back.
  local at_ms = math.ceil(keep * 1000)
  if redis.call('PEXPIREAT', hash, at_ms, 'GT') == 0 and redis.call('PTTL', hash) == -1 then
    redis.call('PEXPIREAT', hash, at_ms)  -- a hash without an expiry yet
  end
  return keep
end

-- One domain's state in the hash: the hash's expiry, and the state ('' = none).
local function th_read(hash, domain)
  local f = redis.call('HMGET', hash, '', domain)
  return th_hash_exp(f[1]), f[2] or ''
end

-- Write one domain's state (fields as th_pack takes them), kept at least until `need`.
local function th_save(hash, hash_exp, domain, need, exp, slot, pause, delay_until, delay, hits)
  exp = math.max(exp, need)
  th_write(hash, {domain, th_pack(exp, slot, pause, delay_until, delay, hits)}, hash_exp, exp, need + 600)
end

-- Keep `state` ('' = none), which the domain `d` carried out of its spider's line, in the hash.
local function th_park(hash, d, state)
  if state == '' then return end
  local exp = th_exp(state)
  th_write(hash, {d, state}, th_hash_exp(redis.call('HGET', hash, '')), exp, exp + 600)
end

-- Delete up to about `count` states of the hash past their `exp`, from the HSCAN cursor
-- `cursor`; returns the next cursor ('0' = the pass is over).
local function th_sweep(hash, cursor, count, now)
  local got = redis.call('HSCAN', hash, cursor, 'COUNT', math.min(count, 2000))
  local stale = {}
  local found = got[2]
  for i = 1, #found, 2 do
    if found[i] ~= '' and th_exp(found[i + 1]) < now then stale[#stale + 1] = found[i] end
  end
  if #stale > 0 then redis.call('HDEL', hash, unpack(stale)) end
  return got[1]
end
