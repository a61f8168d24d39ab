"""Samples the live crawls' progress every REST_SAMPLE_INTERVAL: per-crawl rates and the chart.

A crawl's pages/s needs two readings of its counters; the gateway keeps one `RateTracker` per live
crawl, and the cluster's pages/s history (for the dashboard chart) from the growth of the crawls'
page counters between two samples. Kept in memory: a restarted gateway starts a new chart.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from typing import Any

from utils.config.clients import RedisClient
from utils.config.settings import Settings
from utils.frontier import progress
from utils.frontier.progress import CrawlRef, Progress, RateTracker
from utils.frontier.shards import Shards

LIVE_LIMIT = 200  # most recent crawls sampled


class Sampler:
    def __init__(self, settings: Settings, redis: RedisClient) -> None:
        self.redis = redis
        self.window = settings.get_float("REST_RATE_WINDOW")
        self.shards = Shards.from_settings(settings)
        self.horizon = settings.get_int("CRAWL_STATE_TIMEOUT")
        points = int(settings.get_int("REST_CHART_SECONDS") / settings.get_float("REST_SAMPLE_INTERVAL")) + 1
        self.series: deque[tuple[float, float]] = deque(maxlen=points)
        self.trackers: dict[CrawlRef, RateTracker] = {}
        self.latest: list[Progress] = []
        self._pages: dict[CrawlRef, int] = {}
        self._last: float | None = None
        self._lock = threading.Lock()

    def sample(self, now: float | None = None) -> None:
        now = time.time() if now is None else now
        refs = progress.live_crawls(self.redis, now - self.horizon, LIVE_LIMIT)
        found = [p for p in progress.read_many(self.redis, refs, self.shards) if p is not None]
        with self._lock:
            if self._last is not None and now > self._last:
                self.series.append((now, self._growth(found) / (now - self._last)))
            for p in found:
                self.trackers.setdefault(p.ref, RateTracker(self.window)).add(now, p)
            live = {p.ref for p in found}
            self.trackers = {ref: t for ref, t in self.trackers.items() if ref in live}
            self._pages = {p.ref: p.pages for p in found}
            self._last, self.latest = now, found

    def _growth(self, found: list[Progress]) -> int:
        """Pages since the last sample; a crawl first seen counts from 0 only if it started since."""
        assert self._last is not None
        grown = 0
        for p in found:
            before = self._pages.get(p.ref)
            if before is None:
                before = 0 if p.times.get("started", 0.0) >= self._last - 1 else p.pages
            grown += max(p.pages - before, 0)
        return grown

    def snapshots(self, now: float | None = None) -> list[dict[str, Any]]:
        with self._lock:
            return [progress.snapshot(p, self.trackers.get(p.ref), now) for p in self.latest]

    def tracker(self, ref: CrawlRef) -> RateTracker | None:
        with self._lock:
            return self.trackers.get(ref)

    def chart(self) -> list[list[float]]:
        with self._lock:
            return [[round(t, 3), round(rate, 2)] for t, rate in self.series]
