"""The periodic stats dumps of Scrapy Cluster's redis monitor in the JSON log (reference §8).

Every STATS_DUMP seconds: "Redis Monitor Stats Dump" (total_<w>, fail_<w>, plugin_<Class>_<w>,
and the reaper's lease_requeued_<w> / lease_dead_<w>), "Crawler Stats Dump" (<spider>_<status>_<w>,
unique/total spider counts, <spider>_spider_count) and "Queue Stats Dump" (queue_<spider> backlog
and domains, total_backlog).
"""

from __future__ import annotations

import logging
from typing import Any

from redis_monitor.stats_report import StatsReport
from utils.config.clients import RedisClient
from utils.config.settings import Settings
from utils.frontier.shards import Shards
from utils.observability.stats import StatsConfig, read_counter, stat_bases

log = logging.getLogger(__name__)


class StatsDumper:
    def __init__(self, report: StatsReport, every: float, crawl: bool, queue: bool) -> None:
        self.report = report
        self.every = every
        self.crawl = crawl
        self.queue = queue
        self.last = 0.0

    @classmethod
    def from_settings(cls, settings: Settings, client: RedisClient) -> StatsDumper:
        report = StatsReport(
            client,
            StatsConfig.from_settings(settings),
            settings.get_int("HEARTBEAT_TIMEOUT"),
            shards=Shards.from_settings(settings),
        )
        return cls(report, settings.get_float("STATS_DUMP"), settings.get_bool("STATS_DUMP_CRAWL"),
                   settings.get_bool("STATS_DUMP_QUEUE"))  # fmt: skip

    def maybe_dump(self, now: float) -> bool:
        if self.every <= 0 or now - self.last < self.every:
            return False
        if self.last == 0.0:  # the first dump comes one period after start, as Scrapy Cluster's
            self.last = now
            return False
        self.last = now
        self.dump()
        return True

    def dump(self) -> None:
        log.info("Redis Monitor Stats Dump", extra=self.monitor_fields())
        if self.crawl:
            log.info("Crawler Stats Dump", extra=self.crawler_fields())
        if self.queue:
            log.info("Queue Stats Dump", extra=self.queue_fields())

    def monitor_fields(self) -> dict[str, Any]:
        prefix = "stats:redis-monitor:"
        fields: dict[str, Any] = {}
        for base in stat_bases(self.report.client, prefix):
            part = base[len(prefix) :]
            name = part if part in ("total", "fail") or ":" in part else f"plugin_{part}"
            for window, n in read_counter(self.report.client, base, self.report.config).items():
                fields[f"{name.replace(':', '_')}_{window}"] = n
        return fields

    def crawler_fields(self) -> dict[str, Any]:
        spiders = self.report.spiders()
        fields: dict[str, Any] = {
            "unique_spider_count": spiders.pop("unique_spider_count"),
            "total_spider_count": spiders.pop("total_spider_count"),
        }
        for spider, body in spiders.items():
            fields[f"{spider}_spider_count"] = body.pop("count")
            for status, counts in body.items():
                for window, n in counts.items():
                    fields[f"{spider}_{status}_{window}"] = n
        return fields

    def queue_fields(self) -> dict[str, Any]:
        queues = self.report.queues()
        fields: dict[str, Any] = {"total_backlog": queues.pop("total_backlog")}
        for name, body in queues.items():
            fields[name] = {"spider_backlog": body["spider_backlog"], "num_domains": body["num_domains"]}
        return fields
