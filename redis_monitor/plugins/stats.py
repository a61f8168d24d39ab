"""`stats`: every kind of Scrapy Cluster's stats answer (§3.3), built by redis_monitor.stats_report."""

from __future__ import annotations

import logging
from typing import Any

from redis_monitor.context import Context
from redis_monitor.stats_report import KINDS, StatsReport
from utils.config.settings import Settings
from utils.jobs.stream import Job
from utils.observability.stats import StatsConfig
from utils.proxies.pool import ProxyPool
from utils.schemas.answers import error_answer, server_time

log = logging.getLogger(__name__)


class StatsMonitor:
    rank = 400

    def __init__(self, report: StatsReport) -> None:
        self.report = report

    @classmethod
    def from_settings(cls, settings: Settings, context: Context) -> StatsMonitor:
        config = StatsConfig.from_settings(settings)
        pool = ProxyPool.from_settings(settings, context.redis)
        return cls(
            StatsReport(
                context.redis, config, settings.get_int("HEARTBEAT_TIMEOUT"), proxy_pool=pool, shards=context.shards
            )
        )

    def accepts(self, job: Job) -> bool:
        return job.kind == "stats"

    def handle(self, job: Job) -> list[dict[str, Any]]:
        kind = job.request.get("stats") or "all"
        fields = {"appid": job.appid, "uuid": job.uuid, "stats": kind}
        log.info("Received %s stats request", kind, extra=fields)
        if kind not in KINDS:
            return [error_answer(job.request, "unknown stats kind", f"stats: {kind!r} is not one of {list(KINDS)}")]
        answer = self.report.build(kind)
        answer.update(stats=kind, appid=job.appid, uuid=job.uuid, server_time=server_time())
        log.info("Sent stats to kafka", extra=fields)
        return [answer]
