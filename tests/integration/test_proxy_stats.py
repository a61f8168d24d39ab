"""The proxy pool's state as a `proxies` stats kind and as Prometheus gauges (issue 11 item 6)."""

from __future__ import annotations

import pytest
import redis

from redis_monitor.stats_report import StatsReport
from utils.observability.stats import StatsConfig
from utils.proxies.metrics import ProxyCollector
from utils.proxies.pool import ProxyPool, parse_proxy_list

pytestmark = pytest.mark.integration

PROXIES = "http://alice:s3cret@127.0.0.1:3128,http://127.0.0.1:3129"


@pytest.fixture
def pool(redis_db: redis.Redis) -> ProxyPool:
    return ProxyPool(redis_db, parse_proxy_list(PROXIES), cooldown=600, cooldown_max=3600, global_domains=3,
                     ttl=3600)  # fmt: skip


def test_the_proxies_stats_kind_lists_counters_and_quarantines_without_credentials(
    pool: ProxyPool, redis_db: redis.Redis
) -> None:
    first, second = (proxy.label for proxy in pool.proxies)
    pool.ban(first, "example.com")
    report = StatsReport(redis_db, StatsConfig([900], 60, 3600), 120, proxy_pool=pool).build("proxies")
    by_proxy = {entry["proxy"]: entry for entry in report["proxies"]}
    assert set(by_proxy) == {"http://127.0.0.1:3128", "http://127.0.0.1:3129"}
    assert by_proxy[first]["bans"] == 1
    assert set(by_proxy[first]["quarantined_domains"]) == {"example.com"}
    assert by_proxy[second]["quarantined_domains"] == {}
    assert [(g["group"], g["proxies"], g["healthy"], g["bans"]) for g in report["groups"]] == [("default", 2, 2, 1)]
    assert "s3cret" not in repr(report)


def test_the_collector_exports_one_series_per_configured_proxy(pool: ProxyPool) -> None:
    first = pool.proxies[0].label
    pool.ban(first, "a.com")
    pool.ban(first, "b.com")
    samples = {(m.name, s.labels.get("proxy")): s.value for m in ProxyCollector(pool).collect() for s in m.samples}
    assert samples[("shoal_proxy_bans", first)] == 2
    assert samples[("shoal_proxy_quarantined_domains", first)] == 2
    assert samples[("shoal_proxy_quarantined", first)] == 0  # 2 domains < PROXY_GLOBAL_BAN_DOMAINS
    assert samples[("shoal_proxy_quarantined_domains", pool.proxies[1].label)] == 0
