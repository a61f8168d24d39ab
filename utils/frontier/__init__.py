"""The crawl frontier in Redis: the heart of Shoal.

Owns: the `Frontier` operations (`operations`: enqueue through the filters, leased pops under the
throttle, settle, release, extend) and the values they exchange (`types`); every Redis key
(`keys`) and the Lua scripts that act on them (`lua/`, loaded by `scripts`); Redis Cluster shards
(`shards`) and the pop planner across them (`pop_planner`); the throttle a spider applies
(`throttle`, `public_ip`) with its live ZooKeeper config (`domain_config`, `zookeeper`); the stored
form of a request (`crawl_request`, `stored_requests`), fingerprints and domains (`fingerprint`,
`domains`), dead letters (`dead_letters`), a crawl's progress (`progress`) and the frontier's
metrics collector (`metrics`).
May import: `utils.config`, `utils.observability`.
"""

from __future__ import annotations

from utils.frontier.operations import DUPEFILTER_MODES, Frontier
from utils.frontier.types import Ack, Lease, NewRequest, Popped, Retry, Settlement, ThrottlePolicy

__all__ = [
    "DUPEFILTER_MODES",
    "Ack",
    "Frontier",
    "Lease",
    "NewRequest",
    "Popped",
    "Retry",
    "Settlement",
    "ThrottlePolicy",
]
