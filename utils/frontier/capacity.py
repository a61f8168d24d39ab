"""The autoscaling signal: how many crawler processes politeness lets the cluster use now (issue 32).

Queue length is the wrong signal for a polite crawler: 10,000 requests on one domain are fetched at
that domain's throttle rate whatever the number of crawlers. What the cluster can fetch now is the
sum, over the domains with queued work (`<spider>:heads`), of the rate each one's throttle allows
(QUEUE_HITS / QUEUE_WINDOW, or its ZooKeeper override as pop.lua last saw it in `<spider>:policy`).
Divided by what one process fetches (the larger of SCALING_*_PAGES_PER_SEC and the pages/s the
live processes were observed to do), rounded up and bounded, it is the recommended process count.

A robots.txt Crawl-delay only ever lowers a domain's rate, so leaving it out errs towards capacity.
Cost per reading: one pipeline of three commands per spider shard plus one ZSCORE per override.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from redis.exceptions import RedisError

from utils.config.settings import Settings
from utils.frontier import keys
from utils.frontier.shards import Shards, spider_shards
from utils.observability.metrics.cached import CachedReading
from utils.observability.metrics.registry import LABELS, CollectorSlot
from utils.observability.stats import live_processes, stat_bases

if TYPE_CHECKING:
    from utils.config.clients import RedisClient

RENDER_SPIDER = "render"  # its processes drive a browser: a capacity of their own
CRAWLER_STATS = "stats:crawler:"  # `stats:crawler:<host>:<spiderid>:<status>` (crawler/stats.py)


@dataclass(frozen=True)
class ScalingPolicy:
    hits: int  # default throttle: hits per window (<= 0: unthrottled)
    window: float  # seconds
    crawler_rate: float  # pages/s of one crawler process
    render_rate: float  # pages/s of one render process
    unthrottled_rate: float  # pages/s a due domain without a throttle may take
    rate_window: int  # seconds of stats buckets the observed rate is taken over
    bucket: int  # seconds per stats bucket (STATS_BUCKET)
    heartbeat_ttl: int  # seconds; a process that beat within it is live
    min_replicas: int
    max_replicas: int

    @classmethod
    def from_settings(cls, settings: Settings) -> ScalingPolicy:
        return cls(
            settings.get_int("QUEUE_HITS"), settings.get_float("QUEUE_WINDOW"),
            settings.get_float("SCALING_CRAWLER_PAGES_PER_SEC"), settings.get_float("SCALING_RENDER_PAGES_PER_SEC"),
            settings.get_float("SCALING_UNTHROTTLED_DOMAIN_RATE"), settings.get_int("SCALING_RATE_WINDOW"),
            settings.get_int("STATS_BUCKET"), settings.get_int("HEARTBEAT_TIMEOUT"),
            settings.get_int("SCALING_MIN_REPLICAS"), settings.get_int("SCALING_MAX_REPLICAS"),
        )  # fmt: skip

    def domain_rate(self, hits: float, window: float) -> float:
        """Pages/s a throttle of `hits` per `window` s allows one domain."""
        return hits / window if hits > 0 and window > 0 else self.unthrottled_rate

    def process_rate(self, spiderid: str) -> float:
        return self.render_rate if spiderid == RENDER_SPIDER else self.crawler_rate

    def replicas(self, allowed_rate: float, per_process: float) -> int:
        """ceil(allowed / per process), within [min, max]; an idle frontier gets the minimum."""
        wanted = math.ceil(allowed_rate / per_process - 1e-9) if per_process > 0 else self.max_replicas
        return min(max(wanted, self.min_replicas), self.max_replicas)


@dataclass(frozen=True)
class SpiderCapacity:
    due_domains: int  # domains with queued requests
    allowed_rate: float  # pages/s their throttles allow together
    processes: int  # live processes of the spider (heartbeats)
    observed_rate: float | None  # pages/s per live process over the rate window; None without processes
    process_rate: float  # pages/s per process the recommendation assumes
    recommended: int  # processes


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


def _overrides(raw: Any) -> dict[str, tuple[float, float]]:
    """pop.lua's last-seen JSON `{domain: [hits, window]}`; empty when unset or unreadable."""
    try:
        parsed = json.loads(_text(raw)) if raw else {}
    except ValueError:
        return {}
    if not isinstance(parsed, dict):
        return {}
    return {d: (float(v[0]), float(v[1])) for d, v in parsed.items() if isinstance(v, list) and len(v) == 2}


def _allowed(client: RedisClient, prefixes: list[str], policy: ScalingPolicy) -> tuple[int, float]:
    """(due domains, allowed pages/s) of one spider over its shards."""
    pipe = client.pipeline(transaction=False)
    for prefix in prefixes:
        pipe.zcard(keys.heads(prefix))
        pipe.hget(keys.policy(prefix), "overrides")
    replies = pipe.execute()
    due = sum(int(n) for n in replies[0::2])
    overrides: dict[str, tuple[float, float]] = {}
    for raw in replies[1::2]:
        overrides.update(_overrides(raw))
    default = policy.domain_rate(policy.hits, policy.window)
    rate = due * default
    if overrides:
        pipe = client.pipeline(transaction=False)
        names = sorted(overrides)
        for domain in names:
            for prefix in prefixes:
                pipe.zscore(keys.heads(prefix), domain)
        found = pipe.execute()
        for index, domain in enumerate(names):
            if any(s is not None for s in found[index * len(prefixes) : (index + 1) * len(prefixes)]):
                rate += policy.domain_rate(*overrides[domain]) - default
    return due, max(rate, 0.0)


def _observed(client: RedisClient, policy: ScalingPolicy, now: float) -> tuple[dict[str, int], dict[str, float]]:
    """({spider: live processes}, {spider: pages/s per live process}) from crawler heartbeats and stats."""
    processes: dict[str, int] = {}
    for ids in live_processes(client, "crawler", policy.heartbeat_ttl).values():
        for process_id in ids:
            spider = process_id.rsplit(":", 1)[0]
            processes[spider] = processes.get(spider, 0) + 1
    bucket = max(policy.bucket, 1)
    whole = max(policy.rate_window // bucket, 1)
    bases = stat_bases(client, CRAWLER_STATS)
    pipe = client.pipeline(transaction=False)
    for base in bases:
        pipe.hgetall(f"{base}:buckets")
    counts: dict[str, dict[int, int]] = {}  # spider -> bucket start -> pages
    for base, buckets in zip(bases, pipe.execute(), strict=True):
        into = counts.setdefault(base[len(CRAWLER_STATS) :].split(":")[-2], {})
        for start, n in buckets.items():
            into[int(start)] = into.get(int(start), 0) + int(n)
    rates: dict[str, float] = {}
    for spider, n in processes.items():
        by_start = counts.get(spider) or {0: 0}
        # The newest bucket written may still be filling (a process writes its counts every
        # STATS_CYCLE, later under load): the rate is over the whole buckets before it, and 0
        # when none was written lately.
        newest = max(by_start)
        recent = newest >= now - policy.rate_window - 2 * bucket
        pages = sum(c for start, c in by_start.items() if newest - whole * bucket <= start < newest) if recent else 0
        rates[spider] = pages / (whole * bucket) / n
    return processes, rates


def read_capacity(
    client: RedisClient, policy: ScalingPolicy, shards: Shards | None = None, now: float | None = None
) -> dict[str, SpiderCapacity]:
    """The scaling signal of every registered spider; RedisError when Redis does not answer."""
    spiders = sorted(_text(s) for s in client.smembers(keys.SPIDERS))
    pairs = spider_shards(spiders, shards or Shards.for_client(client))
    processes, observed = _observed(client, policy, time.time() if now is None else now)
    found: dict[str, SpiderCapacity] = {}
    for sid in spiders:
        due, allowed = _allowed(client, [prefix for owner, prefix in pairs if owner == sid], policy)
        seen = observed.get(sid)
        per_process = max(policy.process_rate(sid), seen or 0.0)
        found[sid] = SpiderCapacity(
            due, allowed, processes.get(sid, 0), seen, per_process, policy.replicas(allowed, per_process)
        )
    return found


def _families() -> dict[str, GaugeMetricFamily]:
    spider = ["spiderid"]
    return {
        "due": GaugeMetricFamily("shoal_frontier_due_domains", "Domains with queued requests", labels=spider),
        "allowed": GaugeMetricFamily(
            "shoal_frontier_allowed_fetch_rate", "Pages/s the due domains' throttles allow together", labels=spider
        ),
        "processes": GaugeMetricFamily("shoal_crawler_processes", "Live crawler processes (heartbeats)", labels=spider),
        "observed": GaugeMetricFamily(
            "shoal_crawler_observed_pages_per_second", "Pages/s per live crawler process, over SCALING_RATE_WINDOW",
            labels=spider,
        ),  # fmt: skip
        "per_process": GaugeMetricFamily(
            "shoal_crawler_capacity_pages_per_second", "Pages/s per process the recommendation assumes", labels=spider
        ),
        "recommended": GaugeMetricFamily(
            "shoal_scaling_recommended_replicas", "Processes politeness lets the spider use now", labels=spider
        ),
    }


class CapacityCollector(Collector):
    """Prometheus collector of the scaling signal; a failed reading exports nothing (the frontier's
    `shoal_frontier_up` says why). Readings are cached like the frontier's."""

    def __init__(
        self, client: RedisClient, policy: ScalingPolicy, cache_seconds: float, shards: Shards | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:  # fmt: skip
        self.client = client
        self.policy = policy
        self.shards = shards
        self._reading = CachedReading(self._read, cache_seconds, clock)

    def reading(self) -> dict[str, SpiderCapacity] | None:
        """The cached reading if fresh, else a new one; None when Redis failed."""
        return self._reading.get()

    def _read(self) -> dict[str, SpiderCapacity] | None:
        try:
            return read_capacity(self.client, self.policy, self.shards)
        except RedisError:
            return None

    def describe(self) -> Iterator[Metric]:
        yield from _families().values()

    def collect(self) -> Iterator[Metric]:
        families = _families()
        for sid, capacity in sorted((self.reading() or {}).items()):
            label = [LABELS("spiderid", sid)]
            families["due"].add_metric(label, capacity.due_domains)
            families["allowed"].add_metric(label, capacity.allowed_rate)
            families["processes"].add_metric(label, capacity.processes)
            if capacity.observed_rate is not None:
                families["observed"].add_metric(label, capacity.observed_rate)
            families["per_process"].add_metric(label, capacity.process_rate)
            families["recommended"].add_metric(label, capacity.recommended)
        yield from families.values()


_slot = CollectorSlot()


def register_capacity_collector(settings: Settings, client: RedisClient) -> CapacityCollector:
    """Export the scaling signal from this process (replacing a collector registered before)."""
    collector = CapacityCollector(
        client, ScalingPolicy.from_settings(settings), settings.get_float("METRICS_FRONTIER_CACHE"),
        Shards.from_settings(settings),
    )  # fmt: skip
    _slot.replace(collector)
    return collector
