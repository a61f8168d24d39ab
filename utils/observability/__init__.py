"""What every process shows about itself: stats counters and heartbeats in Redis (`stats`) and
Prometheus metrics (`metrics`: registry, recording helpers, the /metrics server, the health check).

Collectors that read a concept's own Redis state live with that concept (`utils.frontier.metrics`,
`utils.proxies.metrics`). May import: `utils.config`.
"""
