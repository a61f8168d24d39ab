"""`info`: what a crawl, or every crawl of an app, has waiting, in Scrapy Cluster's shapes (§3.2).

Crawl level reads the crawl's index; app level takes the app's crawls from the registry
`shoal:crawls` (no SCAN), so both cost O(requests of the crawls asked about). Each answer also
carries `"progress"` (utils.frontier.progress: counters, pages/s, ETA), per crawl at app level.
"""

from __future__ import annotations

import logging
from typing import Any

from redis_monitor import crawl_info
from redis_monitor.context import Context
from redis_monitor.plugins.base import action_answer, is_action
from utils.config.settings import Settings
from utils.frontier import keys, tier
from utils.frontier.progress import CrawlRef
from utils.frontier.tier import DiskTier
from utils.jobs.stream import Job

log = logging.getLogger(__name__)


class InfoMonitor:
    rank = 100

    def __init__(self, context: Context, disk: DiskTier | None = None) -> None:
        self.redis = context.redis
        self.shards = context.shards
        self.disk = disk

    @classmethod
    def from_settings(cls, settings: Settings, context: Context) -> InfoMonitor:
        return cls(context, DiskTier.from_settings(settings, context.redis) if tier.configured(settings) else None)

    def accepts(self, job: Job) -> bool:
        return is_action(job, "info")

    def handle(self, job: Job) -> list[dict[str, Any]]:
        request = job.request
        log.info("Received info request", extra=_log_fields(job))
        if request.get("crawlid"):
            answer = self.crawl_info(job, CrawlRef(request["spiderid"], job.appid, request["crawlid"]))
        else:
            answer = self.app_info(job)
        log.info("Sent info to kafka", extra={**_log_fields(job), "total_pending": answer["total_pending"]})
        return [answer]

    def crawl_info(self, job: Job, ref: CrawlRef) -> dict[str, Any]:
        view = crawl_info.crawl_view(self.redis, ref, self.shards, self.disk)
        answer = action_answer(
            job,
            total_pending=view["total"],
            total_domains=len(view["domains"]),
            domains=view["domains"],
            progress=crawl_info.progress_view(self.redis, ref, self.shards),
            dupefilter=crawl_info.dupefilter_view(self.redis, ref, self.shards),
        )
        del answer["action"]  # Scrapy Cluster's info answers carry no "action"
        expires = self.redis.get(keys.timeout(*_parts(ref)))
        if expires is not None:
            answer["expires"] = expires  # the raw string, as Scrapy Cluster
        return answer

    def app_info(self, job: Job) -> dict[str, Any]:
        sid = job.request["spiderid"]
        crawlids: dict[str, Any] = {}
        for ref in self._app_crawls(sid, job.appid):
            view = crawl_info.crawl_view(self.redis, ref, self.shards, self.disk)
            entry = {"total": view["total"], "distinct_domains": len(view["domains"]), "domains": view["domains"]}
            entry["progress"] = crawl_info.progress_view(self.redis, ref, self.shards)
            if view["total"] == 0 and entry["progress"]["pending"] == 0:
                continue  # nothing left of it: Scrapy Cluster listed crawls with queued requests only
            expires = self.redis.get(keys.timeout(*_parts(ref)))
            if expires is not None:
                entry["expires"] = int(float(expires))
            crawlids[ref.crawlid] = entry
        answer = action_answer(
            job,
            total_pending=sum(c["total"] for c in crawlids.values()),
            total_crawlids=len(crawlids),
            total_domains=sum(c["distinct_domains"] for c in crawlids.values()),
            crawlids=crawlids,
        )
        del answer["action"]
        return answer

    def _app_crawls(self, spiderid: str, appid: str) -> list[CrawlRef]:
        prefix = f"{spiderid}\t{appid}\t"
        return sorted(CrawlRef.from_member(m) for m in self.redis.zrange(keys.CRAWLS, 0, -1) if m.startswith(prefix))


def _parts(ref: CrawlRef) -> tuple[str, str, str]:
    return ref.spiderid, ref.appid, ref.crawlid


def _log_fields(job: Job) -> dict[str, Any]:
    r = job.request
    return {"appid": job.appid, "uuid": job.uuid, "spiderid": r.get("spiderid"), "crawlid": r.get("crawlid")}
