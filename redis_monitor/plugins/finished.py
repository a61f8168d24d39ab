"""The "finished" announcement: a crawl with nothing queued, in flight or waiting to retry.

Every FINISHED_INTERVAL the live crawls of `shoal:crawls` are checked by rm_finish.lua, which
marks a finished crawl (HSETNX `finished`) in the same call as the check, so exactly one monitor
announces it: `{"action": "finished", "appid", "crawlid", "spiderid", "server_time", "progress"}`
on the outbound topic. Crawls whose progress expired (CRAWL_STATE_TIMEOUT idle) leave the registry.
"""

from __future__ import annotations

import logging

from redis_monitor import crawl_info
from redis_monitor.context import Context
from redis_monitor.plugins.base import Every
from utils import keys
from utils.answers import server_time
from utils.metrics import record_crawl_ended
from utils.progress import CrawlRef
from utils.scripts import source
from utils.settings import Settings

log = logging.getLogger(__name__)

CHECK_CHUNK = 500  # crawls per rm_finish.lua call


class FinishedMonitor:
    rank = 800

    def __init__(self, context: Context, interval: float) -> None:
        self.context = context
        self.redis = context.redis
        self.script = context.redis.register_script(source("rm_finish"))
        self.every = Every(interval, context.clock)
        self.known: dict[str, float] = {}  # finished crawls -> their registry score when last seen

    @classmethod
    def from_settings(cls, settings: Settings, context: Context) -> FinishedMonitor:
        return cls(context, settings.get_float("FINISHED_INTERVAL"))

    def run_once(self, max_items: int) -> int:
        if not self.every.due():
            return 0
        live = dict(self.redis.zrange(keys.CRAWLS, 0, -1, withscores=True))
        self.known = {m: s for m, s in self.known.items() if live.get(m) == s}  # re-check crawls fed again
        todo = [m for m in live if m not in self.known]
        announced = 0
        for start in range(0, len(todo), CHECK_CHUNK):
            chunk = todo[start : start + CHECK_CHUNK]
            refs = [CrawlRef.from_member(m) for m in chunk]
            statuses = self.script(args=[part for ref in refs for part in (ref.spiderid, ref.appid, ref.crawlid)])
            gone = [m for m, status in zip(chunk, statuses, strict=True) if status == "gone"]
            if gone:
                self.redis.zrem(keys.CRAWLS, *gone)
            for member, ref, status in zip(chunk, refs, statuses, strict=True):
                if status in ("finished", "done"):
                    self.known[member] = live[member]
                if status == "finished":
                    self.announce(ref)
                    announced += 1
        return announced

    def announce(self, ref: CrawlRef) -> None:
        progress = crawl_info.progress_view(self.redis, ref)
        fields = {"appid": ref.appid, "crawlid": ref.crawlid, "spiderid": ref.spiderid}
        self.context.outbox.answer({**fields, "action": "finished", "server_time": server_time(),
                                    "progress": progress})  # fmt: skip
        self.context.count(type(self).__name__)
        record_crawl_ended("finished")
        log.info("Crawl finished", extra={**fields, "crawled": progress.get("crawled"), "dead": progress.get("dead")})
