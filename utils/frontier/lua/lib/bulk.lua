-- lib/bulk.lua: one Redis command for many values without overflowing Lua's C stack.
--
-- bulk(command, key, flat): `command key v1 v2 ...` once per CHUNK values of the array `flat`
-- (CHUNK is even, so member/score and field/value pairs stay whole). Reads and writes only `key`.

local CHUNK = 4000  -- most values one command takes from unpack() (Lua's C stack holds ~8,000)

local function bulk(command, key, flat)
  for i = 1, #flat, CHUNK do
    redis.call(command, key, unpack(flat, i, math.min(i + CHUNK - 1, #flat)))
  end
end
