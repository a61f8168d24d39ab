"""Jobs for the redis monitors: action, stats and zookeeper requests, one stream entry each
(`stream`), added once per incoming message by `lua/add_job.lua`.

May import: `utils.config`, `utils.frontier` (keys and the Lua loader).
"""
