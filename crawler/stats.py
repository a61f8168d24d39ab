"""Per-status-code crawler stats (Scrapy Cluster's RedisStatsMiddleware) in time-bucketed counters.

Each response counts under `stats:crawler:<host>:<spiderid>:<status>`, each download exception
under `...:504` (as Scrapy Cluster's LogRetryMiddleware); the counts are buffered in process and
written every STATS_CYCLE seconds in one pipeline, every key with a TTL (utils/observability/stats.py). Both also
count in the Prometheus pages-by-status metric (status "error" for an exception; ~5 µs a page).
"""

from __future__ import annotations

import logging
import socket
from typing import Any

from scrapy import Request, signals
from scrapy.crawler import Crawler
from scrapy.http import Response
from twisted.internet import task

from utils.config.clients import redis_client
from utils.config.settings import Settings
from utils.observability.metrics import record_page
from utils.observability.stats import StatsCollector, StatsConfig

log = logging.getLogger(__name__)

EXCEPTION_STATUS = 504


class StatusStatsMiddleware:
    def __init__(self, collector: StatsCollector, codes: set[int], cycle: float, host: str) -> None:
        self.collector = collector
        self.codes = codes  # empty = every status
        self.cycle = cycle
        self.host = host
        self.spiderid = ""
        self.flushes = 0  # Redis round trips, for the round-trips-per-page figure
        self._dirty = False
        self._loop: task.LoopingCall | None = None

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> StatusStatsMiddleware:
        settings: Settings = crawler.settings["SHOAL"]
        collector = StatsCollector(redis_client(settings), StatsConfig.from_settings(settings))
        codes = {int(c) for c in settings["STATS_RESPONSE_CODES"]}
        mw = cls(collector, codes, settings.get_float("STATS_CYCLE"), socket.gethostname())
        crawler.signals.connect(mw.spider_opened, signal=signals.spider_opened)
        crawler.signals.connect(mw.spider_closed, signal=signals.spider_closed)
        return mw

    def spider_opened(self, spider: Any) -> None:
        self.spiderid = spider.name
        self._loop = task.LoopingCall(self.flush)
        self._loop.start(self.cycle, now=False)

    def spider_closed(self, spider: Any) -> None:
        if self._loop is not None and self._loop.running:
            self._loop.stop()
        self.flush()
        log.info("Crawler stats closed", extra={"stats_flushes": self.flushes, "spiderid": self.spiderid})

    def process_response(self, request: Request, response: Response) -> Response:
        self.count(response.status)
        record_page(self.spiderid, response.status, len(response.body), request.meta.get("download_latency"))
        return response

    def process_exception(self, request: Request, exception: Exception) -> None:
        self.count(EXCEPTION_STATUS)
        record_page(self.spiderid, None)

    def count(self, status: int) -> None:
        if not self.codes or status in self.codes:
            self._dirty = True
            self.collector.incr(f"stats:crawler:{self.host}:{self.spiderid}:{status}")

    def flush(self) -> None:
        try:
            if self._dirty:
                self._dirty = False
                self.flushes += 1
                self.collector.flush()
        except Exception:  # Redis away: the counts stay buffered for the next cycle
            log.warning("Could not write crawler stats; will retry", exc_info=True)
