"""Expiry: a crawl whose `expires` time has passed is purged like a stop and announced (§3.2).

Due crawls are found in the index `shoal:timeouts` (member `<sid>\\t<appid>\\t<crawlid>`, score =
expiry time), never by scanning for `timeout:*` keys. The kafka monitor writes the timeout key;
this plugin also indexes the timeout keys of crawls that queued something since its last look
(from `shoal:crawls`, O(active crawls)), so expiry works whether or not the writer indexes them.
purge.lua checks and deletes the timeout key in the same call, so one monitor expires a crawl once.
"""

from __future__ import annotations

import logging

from redis_monitor.context import Context
from redis_monitor.plugins.base import Every
from redis_monitor.plugins.stop import purger_of
from redis_monitor.purge import Purger
from utils.config.clients import RedisClient
from utils.config.settings import Settings
from utils.frontier import keys
from utils.frontier.progress import CrawlRef
from utils.observability.metrics import record_crawl_ended
from utils.schemas.answers import server_time

log = logging.getLogger(__name__)

TIMEOUTS = keys.TIMEOUTS
LOOKBACK = 10.0  # seconds of overlap between two looks at shoal:crawls (writes race the look)


class ExpireMonitor:
    rank = 300

    def __init__(self, context: Context, purger: Purger, interval: float) -> None:
        self.context = context
        self.redis: RedisClient = context.redis
        self.purger = purger
        self.every = Every(interval, context.clock)
        self.seen_until: float | None = None  # Redis time of the last look at shoal:crawls

    @classmethod
    def from_settings(cls, settings: Settings, context: Context) -> ExpireMonitor:
        return cls(context, purger_of(settings, context), settings.get_float("EXPIRE_INTERVAL"))

    def run_once(self, max_items: int) -> int:
        if not self.every.due():
            return 0
        self.index_new_timeouts()
        due = self.redis.zrangebyscore(TIMEOUTS, "-inf", self.context.clock(), start=0, num=max_items)
        for member in due:
            self.expire(CrawlRef.from_member(member))
        if len(due) == max_items:
            self.every.again_now()
        return len(due)

    def index_new_timeouts(self) -> None:
        """Index the timeout keys of crawls active since the last look (all crawls at start-up)."""
        seconds, micros = self.redis.time()
        now = seconds + micros / 1e6
        since = "-inf" if self.seen_until is None else self.seen_until - LOOKBACK
        members = self.redis.zrangebyscore(keys.CRAWLS, since, "+inf")
        self.seen_until = now
        refs = [CrawlRef.from_member(m) for m in members]
        pipe = self.redis.pipeline(transaction=False)
        for ref in refs:
            pipe.get(keys.timeout(ref.spiderid, ref.appid, ref.crawlid))
        values = zip(members, pipe.execute() if refs else [], strict=True)
        found = {m: at for m, at in ((m, _as_time(v)) for m, v in values) if at is not None}
        if found:
            self.redis.zadd(TIMEOUTS, found)

    def expire(self, ref: CrawlRef) -> None:
        purged = self.purger.purge(ref, "expired", check_expiry=True)
        member = keys.crawl_member(ref.spiderid, ref.appid, ref.crawlid)
        if purged is None:  # stopped meanwhile, or given a later expiry: re-index from the key
            at = _as_time(self.redis.get(keys.timeout(ref.spiderid, ref.appid, ref.crawlid)))
            if at is None:
                self.redis.zrem(TIMEOUTS, member)
            else:  # a later expiry (or one due by this clock but not yet by Redis's): look again later
                self.redis.zadd(TIMEOUTS, {member: at})
            return
        fields = {"appid": ref.appid, "crawlid": ref.crawlid, "spiderid": ref.spiderid}
        log.info("Expiring crawl found", extra=fields)
        self.context.outbox.answer({**fields, "action": "expired", "total_expired": purged,
                                    "server_time": server_time()})  # fmt: skip
        self.context.count(type(self).__name__)
        self.context.count("total")
        record_crawl_ended("expired")
        log.info("Sent expired ack to kafka", extra={**fields, "total_expired": purged})


def _as_time(value: str | None) -> float | None:
    """A timeout key's value as unix seconds; None when missing, unreadable or 0 (= never)."""
    try:
        at = float(value) if value is not None else 0.0
    except ValueError:
        return None
    return at if at > 0 else None
