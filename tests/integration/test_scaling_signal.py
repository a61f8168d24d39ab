"""The autoscaling signal read from a real frontier (issue 32): what politeness lets the cluster
fetch, not the queue length, decides the recommended crawler count."""

from __future__ import annotations

import math
import time

import pytest
import redis

from tests.integration.test_frontier import new
from tests.integration.test_frontier_broad import fill
from utils.frontier import Frontier, ThrottlePolicy, keys
from utils.frontier.capacity import CapacityCollector, ScalingPolicy, read_capacity
from utils.observability.stats import StatsCollector, StatsConfig, beat

pytestmark = pytest.mark.integration

DEFAULT = ScalingPolicy(
    hits=10, window=60, crawler_rate=80.0, render_rate=2.3, unthrottled_rate=80.0, rate_window=120, bucket=60,
    heartbeat_ttl=120, min_replicas=1, max_replicas=100,
)  # fmt: skip: the shipped defaults (utils/config/default_settings.py)


@pytest.fixture
def frontier(redis_db: redis.Redis) -> Frontier:
    return Frontier(redis_db, lease_timeout=300)


def sample_value(families: list, name: str, **labels: str) -> float:
    (value,) = [s.value for f in families for s in f.samples if s.name == name and s.labels == labels]
    return value


def crawlers_were_seen(client: redis.Redis, pages_per_second: float, processes: int, now: float) -> None:
    """Live crawler processes of `link` whose stats say they fetched `pages_per_second` each over
    the two whole minutes before the newest (which may still be filling), written as crawler/stats.py
    and the scheduler's heartbeat write them."""
    for n in range(processes):
        beat(client, "crawler", "node1", f"link:{n}", 120, keys.crawler_heartbeat("node1", "link", str(n)))
    for minute in (1, 2, 3):
        at = (int(now) // 60 - minute) * 60 + 30
        stats = StatsCollector(client, StatsConfig([900], 60, 3600), clock=lambda at=at: at)
        stats.incr("stats:crawler:node1:link:200", int(pages_per_second * processes * 60))
        stats.flush()


def test_ten_thousand_requests_on_one_domain_recommend_one_crawler(frontier: Frontier, redis_db: redis.Redis) -> None:
    fill(frontier, domains=1, per_domain=10_000)

    (found,) = read_capacity(redis_db, DEFAULT).values()

    assert found.due_domains == 1
    assert found.allowed_rate == pytest.approx(10 / 60)
    assert found.recommended == 1


def test_two_thousand_domains_recommend_what_the_measured_rate_needs(frontier: Frontier, redis_db: redis.Redis) -> None:
    fill(frontier, domains=2000, per_domain=5)
    ideal = 2000 * 10 / 60  # pages/s the default throttle allows over 2,000 due domains

    assumed = read_capacity(redis_db, DEFAULT)["link"]
    crawlers_were_seen(redis_db, pages_per_second=150.0, processes=2, now=time.time())
    measured = read_capacity(redis_db, DEFAULT)["link"]

    assert assumed.allowed_rate == pytest.approx(ideal)
    assert assumed.recommended == math.ceil(ideal / 80.0) == 5  # no crawler seen: SCALING_CRAWLER_PAGES_PER_SEC
    assert measured.processes == 2
    assert measured.observed_rate == pytest.approx(150.0)
    assert measured.recommended == math.ceil(ideal / 150.0) == 3


def test_an_idle_frontier_recommends_the_minimum(frontier: Frontier, redis_db: redis.Redis) -> None:
    frontier.enqueue([new("http://once.test/1", "once.test")])
    assert frontier.pop("link", 10, ThrottlePolicy(hits=10, window=60)).leases  # leased: nothing left queued

    found = read_capacity(redis_db, ScalingPolicy(**{**DEFAULT.__dict__, "min_replicas": 2}))["link"]

    assert (found.due_domains, found.allowed_rate, found.recommended) == (0, 0.0, 2)


def test_a_zookeeper_override_counts_at_its_own_rate(frontier: Frontier, redis_db: redis.Redis) -> None:
    fill(frontier, domains=3, per_domain=2)
    overrides = {"d0.test": (600, 60), "absent.test": (6000, 60)}  # 10 pages/s; no work on absent.test
    frontier.pop("link", 1, ThrottlePolicy(hits=10, window=60, overrides=overrides))  # pop.lua records them

    found = read_capacity(redis_db, DEFAULT)["link"]

    assert found.due_domains == 3
    assert found.allowed_rate == pytest.approx(10.0 + 2 * 10 / 60)


def test_the_signal_is_exported_as_prometheus_metrics(frontier: Frontier, redis_db: redis.Redis) -> None:
    fill(frontier, domains=600, per_domain=1)
    collector = CapacityCollector(redis_db, DEFAULT, cache_seconds=0)

    families = list(collector.collect())

    assert sample_value(families, "shoal_frontier_due_domains", spiderid="link") == 600
    assert sample_value(families, "shoal_frontier_allowed_fetch_rate", spiderid="link") == pytest.approx(100.0)
    assert sample_value(families, "shoal_crawler_capacity_pages_per_second", spiderid="link") == 80.0
    assert sample_value(families, "shoal_scaling_recommended_replicas", spiderid="link") == 2
