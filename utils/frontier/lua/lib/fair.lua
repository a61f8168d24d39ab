-- lib/fair.lua: fair queuing between the crawls of one priority on one domain (enqueue.lua).
--
-- Self-clocked fair queuing: each request gets a virtual finish tag on its domain and priority
-- class, start = max(V, F) and finish = start + FQ_QUANTUM / weight, where F is the last finish tag
-- its crawl got there and V the class's virtual time: the start of the class's head in the queue
-- (the next to be served; its tag less one weight-1 quantum), or, with the class empty, the highest
-- tag it handed out; a domain without state (its queue emptied, or idle past the TTL) starts at 0
-- without reading its queue (most domains of a broad crawl). The tag leads the
-- queue member (lib/member.lua), so the queue ZSET's (score, member) order is the order of service
-- and pop.lua leases by it unchanged: a crawl that arrives behind another's backlog is interleaved
-- with it by weight instead of waiting for it, and a crawl's own requests keep their order.
--
-- State, HASH K.fair(sid, d): `<code> <class>` -> F, `\t<class>` -> highest tag of the class. It
-- lives while the domain has queued requests: pop.lua drops it when the domain's queue empties (a
-- DEL of its own, so the pop pastes none of this lib), and so does ds_place (lib/domain_sets.lua)
-- for the other scripts that empty a queue: with nothing queued, every crawl starts level again.
--
-- fq_new() -> a call's cache `fq`; fq_tag(fq, sid, d, score, code, weight) -> the next request's
-- finish tag; fq_write(fq): write what the call changed.

--! include keys
--! include member

local FQ_QUANTUM = 100000  -- tag units a request of weight 1 costs (weights 0.01 .. 100)

local function fq_new()
  return {domains = {}}
end

-- The call's view of one domain's state: class times read (`v`), tags read or set (`f`), changed fields (`out`).
local function fq_domain(fq, sid, d)
  local key = K.fair(sid, d)
  local st = fq.domains[key]
  if not st then
    st = {v = {}, f = {}, out = {}}
    local all = redis.call('HGETALL', key)  -- a few fields: one per crawl and class queued there lately
    for i = 1, #all, 2 do st.f[all[i]] = tonumber(all[i + 1]) end
    st.fresh = #all == 0  -- no state: the queue was empty (or idle past the TTL), nobody is ahead
    fq.domains[key] = st
  end
  return key, st
end

local function fq_tag(fq, sid, d, score, code, weight)
  local _, st = fq_domain(fq, sid, d)
  local class = string.format('%.17g', score)
  local v = st.v[class]
  if v == nil then
    local head = not st.fresh and redis.call('ZRANGEBYSCORE', K.queue(sid, d), score, score, 'LIMIT', 0, 1) or {}
    v = head[1] and qm_tag(head[1])
    if v then
      v = math.max(0, v - FQ_QUANTUM)  -- the head's start, as if of weight 1: a newcomer comes right after it
    else
      v = st.f['\t' .. class] or 0
    end
    st.v[class] = v
  end
  local field = code .. ' ' .. class
  local finish = math.max(v, st.f[field] or 0) + math.max(1, math.floor(FQ_QUANTUM / weight + 0.5))
  st.f[field] = finish
  st.out[field] = finish
  local top = '\t' .. class
  if finish > (st.f[top] or 0) then st.f[top] = finish; st.out[top] = finish end
  return finish
end

local function fq_write(fq)
  for key, st in pairs(fq.domains) do
    local args = {}
    for field, tag in pairs(st.out) do
      args[#args + 1] = field
      args[#args + 1] = string.format('%d', tag)
    end
    if #args > 0 then redis.call('HSET', key, unpack(args)) end
  end
  fq.domains = {}
end
