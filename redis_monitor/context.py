"""What every redis monitor plugin shares: settings, Redis, the outbox to Kafka, and the stats."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property

from redis_monitor.outbox import Outbox
from utils.config.clients import RedisClient
from utils.config.settings import Settings
from utils.frontier.shards import Shards
from utils.observability.stats import StatsCollector

STATS_PREFIX = "stats:redis-monitor:"  # + total | fail | <PluginClass> | <name>:<detail>


@dataclass
class Context:
    """Built once per monitor process and handed to every plugin's `from_settings`.

    `redis` decodes responses to str: every key, member and payload Shoal writes is UTF-8 text.
    """

    settings: Settings
    redis: RedisClient
    outbox: Outbox
    stats: StatsCollector
    host: str
    process_id: str
    clock: Callable[[], float] = field(default=time.time)

    @cached_property
    def shards(self) -> Shards:
        """The frontier's shards: one on a single Redis, REDIS_CLUSTER_SHARDS on a cluster."""
        return Shards.from_settings(self.settings)

    def count(self, name: str, n: int = 1) -> None:
        """Add to the monitor's counter `name` (plugin class names appear in the stats answer)."""
        if n:
            self.stats.incr(STATS_PREFIX + name, n)
