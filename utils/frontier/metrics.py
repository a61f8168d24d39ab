"""Queue depth, in-flight and retrying requests per spider, and the largest domain backlogs, read from Redis.

A collector, not gauges someone must keep up to date: each scrape reads the frontier's own keys
(utils/frontier/keys.py), so the numbers are true whoever wrote them. Register it in one process per cluster
(the redis monitor); dashboards take `max by (spiderid)` in case several export it. Cost per reading:
one pipeline for the spiders, then one ZCARD per domain with a backlog, pipelined 1,000 at a time
(~120 k ops/s pipelined, DESIGN.md), at most METRICS_DOMAIN_SCAN_LIMIT domains per spider; a reading
is cached METRICS_FRONTIER_CACHE seconds so several scrapers cost one.
"""

from __future__ import annotations

import heapq
import logging
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from redis.exceptions import RedisError, ResponseError

from utils.config.settings import Settings
from utils.frontier import keys
from utils.frontier.memory import RedisMemory, per_request, redis_memory
from utils.frontier.shards import Shards, spider_shards
from utils.observability.metrics.cached import CachedReading
from utils.observability.metrics.registry import LABELS, CollectorSlot

if TYPE_CHECKING:  # utils.config.clients loads kafka-python (~100 ms); `shoal status` imports this package
    from utils.config.clients import RedisClient

log = logging.getLogger(__name__)

CHUNK = 1000  # commands per pipeline round trip


@dataclass
class SpiderReading:
    queued: int = 0
    inflight: int = 0
    retrying: int = 0
    domains: int = 0  # domains with a backlog (entries of <spider>:heads)
    top: list[tuple[int, str]] = field(default_factory=list)  # (backlog, domain), largest first
    truncated: bool = False  # more domains than the scan limit: queued counts only those read


@dataclass
class FrontierReading:
    spiders: dict[str, SpiderReading]
    crawls: int
    jobs_pending: int | None  # delivered to a redis monitor, not acknowledged
    jobs_lag: int | None  # not yet delivered (Redis >= 7)
    memory: RedisMemory | None = None  # Redis's memory figures at the reading

    def stored(self) -> int:
        """Requests the frontier holds: queued, in flight and waiting to retry, of every spider."""
        return sum(s.queued + s.inflight + s.retrying for s in self.spiders.values())


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


def _jobs(client: RedisClient) -> tuple[int | None, int | None]:
    """(pending, lag) of the redis monitors' group on the jobs stream; None before it exists."""
    try:
        groups = client.xinfo_groups(keys.JOBS)
    except ResponseError:  # no stream yet
        return None, None
    for group in groups:
        if _text(group["name"]) == keys.JOBS_GROUP:
            lag = group.get("lag")
            return int(group["pending"]), None if lag is None else int(lag)
    return None, None


def _backlogs(client: RedisClient, spiderid: str, domains: list[str]) -> list[tuple[int, str]]:
    """(ZCARD of each domain's queue, domain), one pipeline per CHUNK domains."""
    found: list[tuple[int, str]] = []
    for start in range(0, len(domains), CHUNK):
        part = domains[start : start + CHUNK]
        pipe = client.pipeline(transaction=False)
        for domain in part:
            pipe.zcard(keys.queue(spiderid, domain))
        found.extend(zip((int(n) for n in pipe.execute()), part, strict=True))
    return found


def read_frontier(client: RedisClient, top_n: int, scan_limit: int, shards: Shards | None = None) -> FrontierReading:
    """One reading of every spider's frontier (summed over its shards); RedisError when Redis does not answer."""
    spiders = sorted(_text(s) for s in client.smembers(keys.SPIDERS))
    pairs = spider_shards(spiders, shards or Shards.for_client(client))
    pipe = client.pipeline(transaction=False)
    for _, prefix in pairs:
        pipe.zcard(keys.inflight(prefix))
        pipe.zcard(keys.delayed(prefix))
        pipe.zcard(keys.heads(prefix))
        pipe.zrange(keys.heads(prefix), 0, scan_limit - 1)
    pipe.zcard(keys.CRAWLS)
    replies = pipe.execute()
    readings: dict[str, SpiderReading] = {}
    for sid in spiders:
        inflight = retrying = domains = 0
        backlogs: list[tuple[int, str]] = []
        truncated = False
        for index, (owner, prefix) in enumerate(pairs):
            if owner != sid:
                continue
            shard_inflight, shard_retrying, shard_domains, heads = replies[4 * index : 4 * index + 4]
            inflight, retrying = inflight + int(shard_inflight), retrying + int(shard_retrying)
            domains += int(shard_domains)
            backlogs.extend(_backlogs(client, prefix, [_text(d) for d in heads]))
            truncated = truncated or int(shard_domains) > len(heads)
        readings[sid] = SpiderReading(
            queued=sum(n for n, _ in backlogs), inflight=inflight, retrying=retrying, domains=domains,
            top=heapq.nlargest(top_n, (b for b in backlogs if b[0] > 0)), truncated=truncated,
        )  # fmt: skip
    pending, lag = _jobs(client)
    return FrontierReading(readings, int(replies[-1]), pending, lag, redis_memory(client))


def _families() -> dict[str, GaugeMetricFamily]:
    def gauge(name: str, doc: str, labels: list[str] | None = None) -> GaugeMetricFamily:
        return GaugeMetricFamily(name, doc, labels=labels)

    spider = ["spiderid"]
    return {
        "up": gauge("shoal_frontier_up", "1 when the last frontier reading from Redis succeeded"),
        "queued": gauge("shoal_queue_depth", "Requests queued (not leased, not waiting to retry)", spider),
        "inflight": gauge("shoal_inflight_requests", "Requests leased to a spider and not yet acknowledged", spider),
        "retrying": gauge("shoal_retrying_requests", "Requests waiting for their retry time", spider),
        "domains": gauge("shoal_backlog_domains", "Domains with queued requests", spider),
        "truncated": gauge("shoal_queue_depth_truncated", "1 when more domains than the scan limit", spider),
        "top": gauge(
            "shoal_domain_backlog", "Queued requests of the largest domain backlogs (top N)", ["spiderid", "domain"]
        ),  # fmt: skip
        "crawls": gauge("shoal_live_crawls", "Crawls in the crawl registry"),
        "pending": gauge("shoal_jobs_pending", "Jobs delivered to a redis monitor and not acknowledged"),
        "lag": gauge("shoal_jobs_lag", "Jobs not yet delivered to any redis monitor"),
        "per_request": gauge("shoal_frontier_bytes_per_request",
                             "Redis used_memory per request the frontier holds (queued, in flight, retrying)"),
    }  # fmt: skip


def _spider_samples(families: dict[str, GaugeMetricFamily], spiders: dict[str, SpiderReading], top_n: int) -> None:
    """Per-spider samples; spider ids past the label budget are summed into one "other" series."""
    merged: dict[str, SpiderReading] = {}
    for sid, reading in spiders.items():
        into = merged.setdefault(LABELS("spiderid", sid), SpiderReading())
        into.queued += reading.queued
        into.inflight += reading.inflight
        into.retrying += reading.retrying
        into.domains += reading.domains
        into.truncated = into.truncated or reading.truncated
        into.top = heapq.nlargest(top_n, [*into.top, *reading.top])
    for label, reading in merged.items():
        for name in ("queued", "inflight", "retrying", "domains"):
            families[name].add_metric([label], getattr(reading, name))
        families["truncated"].add_metric([label], 1 if reading.truncated else 0)
        for backlog, domain in reading.top:
            families["top"].add_metric([label, domain], backlog)


class FrontierCollector(Collector):
    """Prometheus collector of the frontier; a failed reading exports shoal_frontier_up 0 only."""

    def __init__(
        self, client: RedisClient, top_n: int, scan_limit: int, cache_seconds: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:  # fmt: skip
        self.client = client
        self.top_n = top_n
        self.scan_limit = scan_limit
        self._reading = CachedReading(self._read, cache_seconds, clock)

    @classmethod
    def from_settings(cls, settings: Settings, client: RedisClient | None = None) -> FrontierCollector:
        from utils.config.clients import redis_client  # it loads kafka-python too: only where a collector is made

        return cls(
            client if client is not None else redis_client(settings),
            settings.get_int("METRICS_TOP_DOMAINS"),
            settings.get_int("METRICS_DOMAIN_SCAN_LIMIT"),
            settings.get_float("METRICS_FRONTIER_CACHE"),
        )

    def reading(self) -> FrontierReading | None:
        """The cached reading if fresh, else a new one; None when Redis failed."""
        return self._reading.get()

    def _read(self) -> FrontierReading | None:
        try:
            return read_frontier(self.client, self.top_n, self.scan_limit)
        except RedisError as exc:
            log.warning("Frontier reading failed", extra={"error": str(exc)})
            return None

    def describe(self) -> Iterator[Metric]:
        yield from _families().values()

    def collect(self) -> Iterator[Metric]:
        families = _families()
        reading = self.reading()
        families["up"].add_metric([], 0 if reading is None else 1)
        if reading is not None:
            _spider_samples(families, reading.spiders, self.top_n)
            families["crawls"].add_metric([], reading.crawls)
            if reading.jobs_pending is not None:
                families["pending"].add_metric([], reading.jobs_pending)
            if reading.jobs_lag is not None:
                families["lag"].add_metric([], reading.jobs_lag)
            each = per_request(reading.memory, reading.stored()) if reading.memory else None
            if each is not None:
                families["per_request"].add_metric([], each)
        yield from families.values()


_slot = CollectorSlot()


def register_frontier_collector(settings: Settings, client: RedisClient | None = None) -> FrontierCollector:
    """Export the frontier from this process (replacing a collector registered before)."""
    collector = FrontierCollector.from_settings(settings, client)
    _slot.replace(collector)
    return collector


def unregister_frontier_collector() -> None:
    _slot.clear()
