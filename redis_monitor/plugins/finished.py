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
from utils.config.settings import Settings
from utils.frontier import keys, progress
from utils.frontier.progress import CrawlRef
from utils.frontier.scripts import source
from utils.observability.metrics import record_crawl_ended
from utils.schemas.answers import server_time

log = logging.getLogger(__name__)

CHECK_CHUNK = 500  # crawls per rm_finish.lua call


class FinishedMonitor:
    rank = 800

    def __init__(self, context: Context, interval: float) -> None:
        self.context = context
        self.redis = context.redis
        self.script = context.redis.register_script(source("rm_finish"))
        self.mark = context.redis.register_script(source("mark_finished"))
        self.shards = context.shards
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
            statuses = self._statuses(refs)
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

    def _statuses(self, refs: list[CrawlRef]) -> list[str]:
        """finished (marked now) | done (marked before) | open | gone, for each crawl."""
        if not self.shards.clustered:  # one shard: check and mark in one atomic call
            return [str(s) for s in self.script(keys=[keys.shard_route("")], args=_flat(refs))]
        return [self._cluster_status(ref) for ref in refs]

    def _cluster_status(self, ref: CrawlRef) -> str:
        """A crawl's status from its shards' progress, read twice.

        The shards live on different masters, so one read is not one instant: a page's children
        may reach their shard just after its ack left another. Two reads that agree on every
        counter, with nothing pending, saw a moment at which the crawl had no work anywhere.
        """
        first = progress.read(self.redis, ref, self.shards)
        if first is None:
            for tag in self.shards.tags:  # gone everywhere: each shard forgets the crawl's code
                self.script(keys=[keys.shard_route(tag)], args=[tag + ref.spiderid, ref.appid, ref.crawlid])
            return "gone"
        if not first.finished:
            return "open"
        second = progress.read(self.redis, ref, self.shards)
        if second is None or second.counters != first.counters:
            return "open"
        marked = self.mark(keys=[self.shards.tags[0] + ref.key], args=[second.enqueued])
        return "finished" if int(marked) else "done"

    def announce(self, ref: CrawlRef) -> None:
        progress = crawl_info.progress_view(self.redis, ref, self.context.shards)
        fields = {"appid": ref.appid, "crawlid": ref.crawlid, "spiderid": ref.spiderid}
        self.context.outbox.answer({**fields, "action": "finished", "server_time": server_time(),
                                    "progress": progress})  # fmt: skip
        self.context.count(type(self).__name__)
        record_crawl_ended("finished")
        log.info("Crawl finished", extra={**fields, "crawled": progress.get("crawled"), "dead": progress.get("dead")})


def _flat(refs: list[CrawlRef]) -> list[str]:
    return [part for ref in refs for part in (ref.spiderid, ref.appid, ref.crawlid)]
