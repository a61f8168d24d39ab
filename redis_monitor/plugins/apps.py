"""Per-app figures: every APPS_REFRESH_INTERVAL, each app's usage summed from its crawls' progress
(utils/apps/usage.py) and written where the edge's quota check, REST, `shoal apps` and the metrics
read it. The quotas node is watched live in ZooKeeper and copied into Redis for the edge (when it
changes, and at each refresh), and gives each app's quota use."""

from __future__ import annotations

import logging

from redis_monitor.context import Context
from redis_monitor.plugins.base import Every
from utils.apps import mirror
from utils.apps.usage import Refresher
from utils.apps.watch import QuotaWatcher
from utils.config.settings import Settings

log = logging.getLogger(__name__)


class AppsMonitor:
    rank = 900

    def __init__(self, context: Context, refresher: Refresher, quotas: QuotaWatcher, interval: float) -> None:
        self.context = context
        self.refresher = refresher
        self.quotas = quotas
        self.every = Every(interval, context.clock)

    @classmethod
    def from_settings(cls, settings: Settings, context: Context) -> AppsMonitor:
        interval = settings.get_float("APPS_REFRESH_INTERVAL")
        refresher = Refresher(context.redis, context.shards, settings.get_float("CRAWL_STATE_TIMEOUT"),
                              settings.get_float("REST_RATE_WINDOW"), interval, context.clock)  # fmt: skip
        quotas = QuotaWatcher.from_settings(settings, lambda q: mirror.write(context.redis, q))
        quotas.start()
        return cls(context, refresher, quotas, interval)

    def run_once(self, max_items: int) -> int:
        if not self.every.due():
            return 0
        if self.quotas.read:  # a Redis flushed or restarted gets its copy back
            mirror.write(self.context.redis, self.quotas.current)
        self.refresher.refresh(self.quotas.current)
        return 0  # housekeeping, not work: an idle monitor still waits between rounds

    def close(self) -> None:
        self.quotas.stop()
