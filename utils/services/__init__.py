"""Launch Redis, ZooKeeper and the Kafka-protocol broker locally: tests, `shoal up`, benchmarks.

`argv` builds the command lines (also exec'd by `shoal service <name>` under supervisord),
`probes` answers "is it up", `process` runs one service, `local` runs the three together;
`postgres` is Debian's PostgreSQL for the sink (initdb, then the server; only on request).
May import: `utils.config` (services are started before anything else exists).
"""

from __future__ import annotations

from utils.services.argv import (
    SERVICE_NAMES,
    broker_argv,
    redis_argv,
    service_argv,
    zoo_cfg,
    zookeeper_argv,
)
from utils.services.local import LocalServices, start_local_services
from utils.services.probes import broker_ready, redis_ready, zookeeper_ready
from utils.services.process import (
    LocalService,
    ServiceError,
    free_port,
    free_ports,
    stop_by_pidfile,
)

__all__ = [
    "SERVICE_NAMES",
    "LocalService",
    "LocalServices",
    "ServiceError",
    "broker_argv",
    "broker_ready",
    "free_port",
    "free_ports",
    "redis_argv",
    "redis_ready",
    "service_argv",
    "start_local_services",
    "stop_by_pidfile",
    "zoo_cfg",
    "zookeeper_argv",
    "zookeeper_ready",
]
