"""The proxy pool shared by every spider of the cluster: its state in Redis (`pool`), its keys
(`keys`), the ban script (`lua/proxy_ban.lua`) and its metrics collector (`metrics`).

May import: `utils.config`, `utils.observability`, `utils.frontier` (the Lua loader).
"""
