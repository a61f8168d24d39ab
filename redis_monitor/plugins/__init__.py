"""Redis monitor plugins: job handlers (info, stop, stats, zookeeper, dead letters) and periodic
tasks (expire, reaper, finished), ranked in REDIS_MONITOR_PLUGINS."""
