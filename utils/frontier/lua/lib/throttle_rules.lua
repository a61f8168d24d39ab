-- lib/throttle_rules.lua: when a domain's throttle allows its next hit, and spending one (the
-- throttle's arithmetic for pop.lua; the state's layout is lib/throttle_state.lua's).
--
-- tr_rules(now, hits, window, moderated, overrides) -> the rules `r` of one pop call: its time,
--   the default hits per window (hits <= 0 = unthrottled), whether hits are spread evenly over
--   the window, and the overrides {domain: [hits, window]}.
-- tr_read(r, d, state) -> `st`, the domain's throttle as read from its packed state ('' = none):
--   st.at is when it next allows a hit (>= now); the rest is what tr_spend needs.
-- tr_spend(r, st) -> when the throttle next allows a hit after one spent now, the new packed
--   state (nil = nothing to remember) and until when it matters (its `exp`).
-- A pause (Retry-After, Crawl-delay) and a delay (Crawl-delay) apply even when unthrottled. The
-- moderated slot advances by one interval while the domain keeps up, so late polls do not drift
-- the rate below hits/window; it never falls more than SLOT_SLACK of an interval behind now, so
-- two hits are never closer than (1 - SLOT_SLACK) intervals, and after an idle spell it restarts.
-- Reads and writes no key.

--! include constants
--! include throttle_state

local function tr_rules(now, hits, window, moderated, overrides)
  return {now = now, now_hit = th_time(now), hits = hits, window = window, moderated = moderated,
          overrides = overrides}
end

local function tr_limits(r, d)
  local o = r.overrides[d]
  if o then return tonumber(o[1]), tonumber(o[2]) end
  return r.hits, r.window
end

local function tr_read(r, d, state)
  local now = r.now
  local exp, slot, pause, delay_until, delay, hits = th_unpack(state)
  local h, w = tr_limits(r, d)
  local st = {domain = d, at = math.max(now, pause), exp = exp, slot = slot, pause = pause,
              delay_until = delay_until, delay = delay_until > now and delay or 0, hits = hits,
              h = h, w = w, n = #hits / TH_WIDTH}
  if h <= 0 then return st end
  if st.n >= st.h then  -- the window is full while the h-th latest hit is inside it
    st.at = math.max(st.at, th_hit(st.hits, st.n - st.h) + st.w)
  end
  if r.moderated and st.h > 1 then st.at = math.max(st.at, st.slot + st.w / st.h) end
  return st
end

local function tr_spend(r, st)
  local now = r.now
  local h, w, n, at, need = st.h, st.w, st.n, now, now  -- need: the state must be kept until then
  local pause, slot, hits, delay = st.pause, st.slot, st.hits, st.delay
  if delay > 0 then
    at = now + delay
    pause, need = at, at
  elseif h <= 0 then
    return at, nil, 0  -- unthrottled, no Crawl-delay: nothing to remember
  end
  if h > 0 then
    if n >= h then
      hits = string.sub(hits, (n + 1 - h) * TH_WIDTH + 1) .. r.now_hit  -- the oldest hits leave
    else
      hits = hits .. r.now_hit
    end
    if n + 1 >= h then  -- full: until the oldest kept hit leaves the window
      local free = th_hit(hits, 0) + w
      if free > at then at = free end
    end
    if r.moderated and h > 1 then
      local interval = w / h
      slot = slot + interval
      if slot < now - SLOT_SLACK * interval then slot = now - SLOT_SLACK * interval end
      if slot + interval > at then at = slot + interval end
    end
    if now + w > need then need = now + w end
  end
  local exp = st.exp
  if need > exp then exp = need + (h > 0 and w or 0) end  -- a window ahead: swept after that
  return at, th_pack(exp, slot, pause, st.delay_until, delay, hits), exp
end
