"""A render process's figures: Prometheus metrics at once, and a small hash in Redis for the dashboard.

Every RENDER_STATS_INTERVAL the process writes `stats:render:<host>:<id>` (pages/s over the last
interval, its own and its browser's resident memory, restarts) with a TTL of HEARTBEAT_TIMEOUT,
and marks itself in `shoal:renderers`, so the dashboard reads only the live ones.
"""

from __future__ import annotations

import logging
import os
import socket
import time
from typing import Any

from scrapy.crawler import Crawler
from twisted.internet import task

from crawler.browser import BrowserFigures
from utils.config.clients import RedisClient, redis_client
from utils.config.settings import Settings
from utils.frontier import keys
from utils.observability.metrics import record_render, set_browser_memory
from utils.observability.process_memory import process_rss

log = logging.getLogger(__name__)


class Phases:
    """Where a render's time goes, summed per phase (monotonic seconds), logged at close.

    Issue 37: the render process was idle 68 % of py-spy samples yet slower than plain Playwright;
    these sums say whether its tabs wait for work, for the browser, or for the page itself.
    """

    def __init__(self, tabs: int) -> None:
        self.tabs = tabs
        self.seconds: dict[str, float] = {}
        self.busy = 0  # tabs rendering now
        self._since = time.monotonic()  # last change of `busy`
        self.first: float | None = None  # the first render's start (tabs idle before it are start-up)

    def add(self, phase: str, seconds: float) -> None:
        self.seconds[phase] = self.seconds.get(phase, 0.0) + seconds

    def tab_taken(self) -> None:
        self._account()
        self.busy += 1
        if self.first is None:
            self.first = time.monotonic()

    def tab_freed(self) -> None:
        self._account()
        self.busy -= 1

    def _account(self) -> None:
        now = time.monotonic()
        if self.first is not None:
            self.add("tab_idle", (self.tabs - self.busy) * (now - self._since))
        self._since = now

    def summary(self, pages: int) -> dict[str, float]:
        """Milliseconds per page of each phase (tab_idle: tab-ms no tab was rendering, per page)."""
        self._account()
        return {k: round(v * 1000 / max(pages, 1), 1) for k, v in sorted(self.seconds.items())}


class RenderStats:
    def __init__(self, redis: RedisClient | None, figures: BrowserFigures, interval: float, ttl: int) -> None:
        self.redis = redis
        self.figures = figures
        self.interval = interval
        self.ttl = ttl
        self.member = f"{socket.gethostname()}:{os.getpid()}"
        self.rendered_count = 0
        self.failed_count = 0
        self.process_peak = 0
        self._last = (time.monotonic(), 0)
        self._restarts = (0, 0)  # (count, memory) already reported to Prometheus
        self._loop: task.LoopingCall | None = None
        self.phases = Phases(1)  # the Renderer puts its own, with its tab count

    @classmethod
    def from_crawler(cls, crawler: Crawler, figures: BrowserFigures) -> RenderStats:
        settings: Settings = crawler.settings["SHOAL"]
        stats = cls(redis_client(settings), figures, settings.get_float("RENDER_STATS_INTERVAL"),
                    settings.get_int("HEARTBEAT_TIMEOUT"))  # fmt: skip
        stats.start()
        return stats

    def start(self) -> None:
        self._loop = task.LoopingCall(self.report)
        self._loop.start(self.interval, now=False)

    def stop(self) -> None:
        if self._loop is not None and self._loop.running:
            self._loop.stop()
        self.report()
        log.info("Render phases", extra={"pages": self.rendered_count,
                                         "ms_per_page": self.phases.summary(self.rendered_count)})  # fmt: skip

    def rendered(self, seconds: float) -> None:
        self.rendered_count += 1
        record_render(seconds)

    def failed(self) -> None:
        self.failed_count += 1
        record_render(None)

    def snapshot(self) -> dict[str, Any]:
        """The figures now; pages/s over the time since the previous snapshot."""
        now = time.monotonic()
        then, count = self._last
        self._last = (now, self.rendered_count)
        rss = process_rss()
        self.process_peak = max(self.process_peak, rss)
        return {
            "pages": self.rendered_count,
            "failed": self.failed_count,
            "pages_per_sec": round((self.rendered_count - count) / max(now - then, 1e-6), 2),
            "process_memory": rss,
            "process_memory_peak": self.process_peak,
            "browser_memory": self.figures.memory,
            "browser_memory_peak": self.figures.memory_peak,
            "browser_restarts": self.figures.restarts,
            "browser_memory_restarts": self.figures.memory_restarts,
            "contexts": self.figures.contexts,
            "ts": time.time(),
        }

    def report(self) -> None:
        """Metrics and the Redis hash; Redis away only costs this report."""
        figures = self.snapshot()
        reported, reported_memory = self._restarts
        memory_restarts = self.figures.memory_restarts - reported_memory
        other = self.figures.restarts - reported - memory_restarts
        set_browser_memory(self.figures.memory, {"memory": memory_restarts, "pages_or_crash": other})
        self._restarts = (self.figures.restarts, self.figures.memory_restarts)
        if self.redis is None:
            return
        try:
            key = keys.render_figures(*self.member.rsplit(":", 1))
            pipe = self.redis.pipeline(transaction=False)
            pipe.hset(key, mapping={k: str(v) for k, v in figures.items()})
            pipe.expire(key, self.ttl)
            pipe.zadd(keys.RENDERERS, {self.member: figures["ts"]})
            pipe.zremrangebyscore(keys.RENDERERS, "-inf", figures["ts"] - self.ttl)
            pipe.execute()
        except Exception:
            log.warning("Could not write render figures; will retry", exc_info=True)
