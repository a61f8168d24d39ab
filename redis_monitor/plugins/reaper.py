"""The lease reaper: requests whose spider died (lease expired) go back to their queue.

A request popped by a spider that then died was lost in Scrapy Cluster (its issue #255). Here
it stays in `<sid>:inflight` until acknowledged; once its lease deadline passes, reap.lua puts it
back in its queue with its attempt counted, or, after RETRY_TIMES attempts, takes it out as dead:
its dead-letter record is kept with the crawl and sent to `<prefix>.dead_letter`, and a page
message with `"success": false` tells the client (API.md, fix 2).
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from typing import Any

from redis_monitor.context import Context
from redis_monitor.plugins.base import Every
from utils.config.settings import Settings
from utils.frontier import crawl_request, dead_letters, keys
from utils.frontier.scripts import source
from utils.observability.metrics import record_dead_letter, record_leases_reaped

log = logging.getLogger(__name__)
REAPED_FIELDS = 6  # values per settled lease in reap.lua's reply


class ReaperMonitor:
    rank = 700

    def __init__(self, context: Context, interval: float, batch: int, retry_times: int, state_ttl: int) -> None:
        self.context = context
        self.redis = context.redis
        self.script = context.redis.register_script(source("reap"))
        self.every = Every(interval, context.clock)
        self.batch = batch
        self.retry_times = retry_times
        self.state_ttl = state_ttl

    @classmethod
    def from_settings(cls, settings: Settings, context: Context) -> ReaperMonitor:
        return cls(
            context,
            settings.get_float("REAPER_INTERVAL"),
            settings.get_int("REAPER_BATCH"),
            settings.get_int("RETRY_TIMES"),
            settings.get_int("CRAWL_STATE_TIMEOUT"),
        )

    def run_once(self, max_items: int) -> int:
        if not self.every.due():
            return 0
        done = 0
        for spiderid in sorted(self.redis.smembers(keys.SPIDERS)):
            for tag in self.context.shards.tags:
                settled = self.reap(spiderid, tag)
                if settled == self.batch:
                    self.every.again_now()
                done += settled
        return done

    def reap(self, spiderid: str, tag: str = "") -> int:
        """One reap.lua call in one frontier shard: re-queue or dead-letter up to REAPER_BATCH expired leases."""
        args = [tag + spiderid, self.batch, self.retry_times, self.state_ttl]
        flat = self.script(keys=[keys.shard_route(tag)], args=args)
        dead = []
        for i in range(0, len(flat), REAPED_FIELDS):
            status, domain, member, payload, crawl, profile = flat[i : i + REAPED_FIELDS]
            appid, _, crawlid = crawl.partition("\t")
            stored = crawl_request.restore(payload, profile, spiderid, appid, crawlid, member)
            request = crawl_request.from_record(stored)
            fields = {
                "spiderid": spiderid,
                "domain": domain,
                "request_id": request["request_id"],
                "url": request.get("url"),
                "appid": request.get("appid"),
                "crawlid": request.get("crawlid"),
                "attempt": request["attempt"],
            }
            if status == "dead":
                log.warning("Lease expired too often; request dead-lettered", extra=fields)
                dead.append(request)
            else:
                log.info("Lease expired; request re-queued", extra=fields)
        self._dead_letter(dead)
        settled = len(flat) // REAPED_FIELDS
        record_leases_reaped(spiderid, settled)
        if dead:
            record_dead_letter("lease_expired", len(dead))
        self.context.count(type(self).__name__, settled)
        self.context.count("lease:requeued", settled - len(dead))
        self.context.count("lease:dead", len(dead))
        return settled

    def _dead_letter(self, requests: list[dict[str, Any]]) -> None:
        if not requests:
            return
        records = []
        for request in requests:
            attempts = int(request.get("attempt", 0)) + 1
            error = f"lease expired {attempts} times: no spider finished the request (LEASE_TIMEOUT)"
            records.append(dead_letters.record(request, error, None, attempts, "redis-monitor reaper"))
        pipe = self.redis.pipeline(transaction=False)
        for record in records:
            dead_letters.store(pipe, record)
        pipe.execute()
        for request, record in zip(requests, records, strict=True):
            self.context.outbox.dead_letter(record)
            self.context.outbox.page(failure_page(request, record["error"]))


def failure_page(request: dict[str, Any], error: str) -> dict[str, Any]:
    """The page message of a request that never got a page: the crawler's fields, `success` false."""
    url = request.get("url")
    return {
        "url": url,
        "response_url": url,
        "status_code": None,
        "status_msg": "",
        "response_headers": {},
        "request_headers": {},
        "body": None,
        "encoding": None,
        "links": [],
        "appid": request.get("appid"),
        "crawlid": request.get("crawlid"),
        "spiderid": request.get("spiderid"),
        "attrs": request.get("attrs"),
        "request_id": request.get("request_id"),
        "attempt": request.get("attempt", 0),
        "curdepth": request.get("curdepth", 0),
        "success": False,
        "exception": error,
        "timestamp": datetime.now(UTC).replace(tzinfo=None).isoformat(),
    }
