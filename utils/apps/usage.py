"""Per-app usage and figures, summed from the crawls' own progress counters.

The frontier's scripts keep exact counters per crawl (utils/frontier/progress.py); an app's figures
are their sums over its live crawls (`shoal:crawls`, no SCAN), computed by the redis monitor every
APPS_REFRESH_INTERVAL seconds (O(live crawls), never O(requests)) and written to two hashes:
`shoal:apps:queued` (appid -> requests waiting, what the `max_queued` quota is checked against: one
HGET per app per batch at the edge) and `shoal:apps:figures` (appid -> JSON, for `shoal apps`, REST,
the dashboard and the metrics). Between two refreshes the kafka monitors add what they admitted to
`shoal:apps:queued` (utils/apps/gate.py), so a flood is refused within one batch of its quota,
not one refresh; each refresh sets the exact sum again.

Rates and the time to first page need two looks, so the refresher keeps samples in memory: pages/s
over APPS_RATE_WINDOW, and a crawl's time to first page is the time from its start to the refresh
that first saw a page of it (an upper bound, one refresh interval fine).
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from typing import Any

import ujson

from utils.apps.quotas import AppQuota, Quotas
from utils.config.clients import RedisClient
from utils.frontier import keys, progress
from utils.frontier.progress import CrawlRef, Progress
from utils.frontier.shards import Shards

CRAWLS_READ = 100_000  # most live crawls one refresh reads (the newest first)
CHUNK = 1000  # crawls per pipelined read
TTFP_KEPT = 20  # crawls per app whose time to first page is averaged
KEY_TTL_REFRESHES = 30  # the two hashes expire this many refresh intervals after the last refresh (at least 60 s)


@dataclass
class AppFigures:
    """One app's figures at one refresh."""

    appid: str
    crawls: int = 0  # crawls with progress kept (running or finished within CRAWL_STATE_TIMEOUT)
    running: int = 0
    queued: int = 0  # waiting in the frontier: queued or waiting to retry
    inflight: int = 0
    pages: int = 0  # pages of its live crawls (crawled, failed, dead)
    pages_per_sec: float = 0.0
    share: float = 0.0  # of the cluster's pages/s, 0..1
    first_page_sec: float | None = None  # mean time to first page of its recent crawls
    quota: dict[str, Any] = field(default_factory=dict)  # its quotas and weight (utils/apps/quotas.py)
    quota_use: dict[str, float] = field(default_factory=dict)  # quota name -> used / limit
    at: float = 0.0

    def add(self, found: Progress) -> None:
        self.crawls += 1
        self.running += 0 if found.finished else 1
        self.queued += found.count("queued") + found.count("retrying")
        self.inflight += found.count("inflight")
        self.pages += found.pages

    def set_quota(self, quota: AppQuota) -> None:
        self.quota, self.quota_use = quota.as_dict(), {}
        used = {"max_queued": self.queued, "max_inflight": self.inflight, "pages_per_minute": self.pages_per_sec * 60}
        for name, amount in used.items():
            limit = getattr(quota, name)
            if limit is not None:
                self.quota_use[name] = round(amount / limit, 4) if limit else 1.0

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


class Refresher:
    """Computes every app's figures and writes them; one per redis monitor (state: rate samples)."""

    def __init__(self, client: RedisClient, shards: Shards, state_timeout: float, window: float,
                 interval: float, clock: Callable[[], float] = time.time) -> None:  # fmt: skip
        self.client = client
        self.shards = shards
        self.state_timeout = state_timeout
        self.window = window
        self.interval = interval
        self.clock = clock
        self._samples: dict[str, deque[tuple[float, int]]] = {}
        self._no_page_yet: set[CrawlRef] = set()
        self._first_page: dict[str, deque[float]] = {}
        self._written: set[str] | None = None  # apps in the hashes after our last write

    def refresh(self, quotas: Quotas) -> dict[str, AppFigures]:
        now = self.clock()
        figures: dict[str, AppFigures] = {}
        seen: set[CrawlRef] = set()
        for found in self._progresses(now):
            figures.setdefault(found.ref.appid, AppFigures(found.ref.appid, at=now)).add(found)
            self._watch_first_page(found, now)
            seen.add(found.ref)
        self._no_page_yet &= seen
        self._rates(figures, now)
        for app in figures.values():
            app.set_quota(quotas.of(app.appid))
            kept = self._first_page.get(app.appid)
            app.first_page_sec = round(sum(kept) / len(kept), 3) if kept else None
        self._write(figures)
        return figures

    def _progresses(self, now: float) -> Iterable[Progress]:
        refs = progress.live_crawls(self.client, now - self.state_timeout, CRAWLS_READ)
        for start in range(0, len(refs), CHUNK):
            yield from (p for p in progress.read_many(self.client, refs[start : start + CHUNK], self.shards) if p)

    def _watch_first_page(self, found: Progress, now: float) -> None:
        ref, started = found.ref, found.times.get("started")
        if found.pages == 0:
            self._no_page_yet.add(ref)
            return
        fresh = started is not None and now - started <= 2 * self.interval  # its first page came since the start
        if (ref in self._no_page_yet or fresh) and started is not None:
            self._first_page.setdefault(ref.appid, deque(maxlen=TTFP_KEPT)).append(max(now - started, 0.0))
        self._no_page_yet.discard(ref)

    def _rates(self, figures: dict[str, AppFigures], now: float) -> None:
        for appid in list(self._samples):
            if appid not in figures:
                del self._samples[appid]
        for app in figures.values():
            samples = self._samples.setdefault(app.appid, deque())
            samples.append((now, app.pages))
            while len(samples) > 2 and now - samples[1][0] >= self.window:
                samples.popleft()
            (t0, pages0), (t1, pages1) = samples[0], samples[-1]
            app.pages_per_sec = round(max(pages1 - pages0, 0) / (t1 - t0), 2) if t1 - t0 >= 1.0 else 0.0
        total = sum(app.pages_per_sec for app in figures.values())
        for app in figures.values():
            app.share = round(app.pages_per_sec / total, 4) if total else 0.0

    def _write(self, figures: dict[str, AppFigures]) -> None:
        if self._written is None:  # first refresh of this process: what others left
            self._written = {_text(a) for a in self.client.hkeys(keys.APPS_FIGURES)}
            self._written |= {_text(a) for a in self.client.hkeys(keys.APPS_QUEUED)}
        gone = self._written - set(figures)
        ttl = max(int(KEY_TTL_REFRESHES * self.interval), 60)
        pipe = self.client.pipeline(transaction=False)
        if gone:
            pipe.hdel(keys.APPS_QUEUED, *gone)
            pipe.hdel(keys.APPS_FIGURES, *gone)
        if figures:
            pipe.hset(keys.APPS_QUEUED, mapping={a: f.queued for a, f in figures.items()})
            pipe.hset(keys.APPS_FIGURES, mapping={a: ujson.dumps(f.as_dict()) for a, f in figures.items()})
            pipe.expire(keys.APPS_QUEUED, ttl)
            pipe.expire(keys.APPS_FIGURES, ttl)
        pipe.execute()
        self._written = set(figures)


def read_figures(client: RedisClient, appids: Iterable[str] | None = None) -> dict[str, dict[str, Any]]:
    """The last refresh's figures: every app's, or those of `appids` (unknown ones left out)."""
    if appids is None:
        raw = client.hgetall(keys.APPS_FIGURES)
        pairs = [(_text(k), v) for k, v in raw.items()]
    else:
        wanted = list(appids)
        pairs = list(zip(wanted, client.hmget(keys.APPS_FIGURES, wanted), strict=True)) if wanted else []
    found = {}
    for appid, value in pairs:
        try:
            found[appid] = ujson.loads(value) if value is not None else None
        except ValueError:
            continue
    return {a: f for a, f in sorted(found.items()) if isinstance(f, dict)}


def _text(value: str | bytes) -> str:
    return value.decode() if isinstance(value, bytes) else value
