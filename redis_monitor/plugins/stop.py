"""`stop`: purge a crawl's queued, delayed and in-flight requests and refuse its children (§3.2).

Scrapy Cluster scanned every queue three times and blacklisted the crawl forever (a crawlid could
never be reused); here one script per 5,000 requests walks the crawl's index, and the blacklist
entry expires after STOP_BLACKLIST_TTL. A stop without crawlid is answered with an error.
"""

from __future__ import annotations

import logging
from typing import Any

from redis_monitor.context import Context
from redis_monitor.plugins.base import action_answer, is_action
from redis_monitor.purge import Purger
from utils.config.settings import Settings
from utils.frontier import tier
from utils.frontier.progress import CrawlRef
from utils.frontier.tier import DiskTier
from utils.jobs.stream import Job
from utils.observability.metrics import record_crawl_ended
from utils.schemas import answers

log = logging.getLogger(__name__)


class StopMonitor:
    rank = 200

    def __init__(self, purger: Purger) -> None:
        self.purger = purger

    @classmethod
    def from_settings(cls, settings: Settings, context: Context) -> StopMonitor:
        return cls(purger_of(settings, context))

    def accepts(self, job: Job) -> bool:
        return is_action(job, "stop")

    def handle(self, job: Job) -> list[dict[str, Any]]:
        request = job.request
        fields = {"appid": job.appid, "uuid": job.uuid, "spiderid": request.get("spiderid"),
                  "crawlid": request.get("crawlid")}  # fmt: skip
        log.info("Received stop request", extra=fields)
        if not request.get("crawlid"):
            log.warning("Stop requests need a crawlid and appid", extra=fields)
            return [answers.error_answer(request, "Stop requests need a crawlid and appid", "crawlid: missing")]
        ref = CrawlRef(request["spiderid"], job.appid, request["crawlid"])
        purged = self.purger.purge(ref, "stopped") or 0
        record_crawl_ended("stopped")
        log.info("Sent stop ack to kafka", extra={**fields, "total_purged": purged})
        return [action_answer(job, total_purged=purged)]


def purger_of(settings: Settings, context: Context) -> Purger:
    return Purger(
        context.redis,
        settings.get_int("STOP_BLACKLIST_TTL"),
        settings.get_int("CRAWL_STATE_TIMEOUT"),
        shards=context.shards,
        disk=DiskTier.from_settings(settings, context.redis) if tier.configured(settings) else None,
    )
