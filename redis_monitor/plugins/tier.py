"""The disk tier's mover (FRONTIER_DISK_TIER_DSN): spill streams into PostgreSQL, low windows refilled.

Every FRONTIER_DISK_TIER_INTERVAL it runs one round of utils/frontier/tier.py over every shard of
every spider whose lock no other monitor holds, so several monitors share the shards. A lost
PostgreSQL is logged and the round tried again later; what a dead mover left half-moved is finished
by the next holder of that shard's lock.
"""

from __future__ import annotations

import logging

import psycopg

from redis_monitor.context import Context
from redis_monitor.plugins.base import Every
from utils.config.plugins import NotConfigured
from utils.config.redact import redact_dsn
from utils.config.settings import Settings
from utils.frontier import keys, tier
from utils.frontier.tier import DiskTier

log = logging.getLogger(__name__)


class TierMonitor:
    rank = 1000

    def __init__(self, context: Context, disk: DiskTier, interval: float) -> None:
        self.context = context
        self.disk = disk
        self.every = Every(interval, context.clock)

    @classmethod
    def from_settings(cls, settings: Settings, context: Context) -> TierMonitor:
        if not tier.configured(settings):
            raise NotConfigured("FRONTIER_DISK_TIER_DSN is empty")
        interval = settings.get_float("FRONTIER_DISK_TIER_INTERVAL")
        return cls(context, DiskTier.from_settings(settings, context.redis), interval)

    def run_once(self, max_items: int) -> int:
        if not self.every.due():
            return 0
        spiders = sorted(self.context.redis.smembers(keys.SPIDERS))
        try:
            moved = self.disk.round(spiders, self.context.clock())
        except psycopg.Error as exc:
            log.warning("Disk tier unreachable", extra={"dsn": redact_dsn(self.disk.conninfo), "error": str(exc)})
            self.disk.close()
            return 0
        if moved:
            self.context.count(type(self).__name__, moved)
            self.every.again_now()
        return moved
