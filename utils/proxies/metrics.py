"""The proxy pool's figures, read from Redis at scrape time (issue 11): per proxy its requests,
successes, bans, immediate retries, the domains it is quarantined for and whether it is
quarantined everywhere; per group (one label set of PROXY_LIST, `default` without labels) its
proxies, how many are healthy and its summed counters. Cardinality is the configured pool, never the data.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from redis.exceptions import RedisError

from utils.config.settings import Settings
from utils.observability.metrics.registry import CollectorSlot
from utils.proxies.pool import GROUP_FIELDS, ProxyPool, group_health

log = logging.getLogger(__name__)

FIELDS = ("requests", "successes", "bans", "retries")


class ProxyCollector(Collector):
    def __init__(self, pool: ProxyPool) -> None:
        self.pool = pool

    def collect(self) -> Iterator[Metric]:
        try:
            state = self.pool.state()
        except RedisError:
            log.warning("Proxy pool state unreadable for metrics")
            return
        families = {name: GaugeMetricFamily(f"shoal_proxy_{name}", f"Proxy {name} (lifetime of its Redis state)",
                                            labels=["proxy"]) for name in FIELDS}  # fmt: skip
        domains = GaugeMetricFamily("shoal_proxy_quarantined_domains", "Domains a proxy is quarantined for",
                                    labels=["proxy"])  # fmt: skip
        everywhere = GaugeMetricFamily("shoal_proxy_quarantined", "1 while a proxy is quarantined for every domain",
                                       labels=["proxy"])  # fmt: skip
        for proxy in state:
            for name in FIELDS:
                families[name].add_metric([proxy["proxy"]], proxy[name])
            domains.add_metric([proxy["proxy"]], len(proxy["quarantined_domains"]))
            everywhere.add_metric([proxy["proxy"]], 1 if proxy["quarantined_until"] else 0)
        yield from families.values()
        yield domains
        yield everywhere
        yield from _groups(state)


def _groups(state: list[dict[str, Any]]) -> Iterator[Metric]:
    """Each group's health: its proxies, those not quarantined everywhere, domain quarantines, counters."""
    names = {"proxies": "Proxies of PROXY_LIST in a group (one label set)",
             "healthy": "Proxies of a group not quarantined for every domain",
             "quarantined_domains": "Domain quarantines of a group's proxies",
             **{name: f"Proxy {name} of a group (lifetime of its Redis state)" for name in GROUP_FIELDS}}  # fmt: skip
    families = {name: GaugeMetricFamily(f"shoal_proxy_group_{name}", text, labels=["group"])
                for name, text in names.items()}  # fmt: skip
    for group in group_health(state):
        for name, family in families.items():
            family.add_metric([group["group"]], group[name])
    yield from families.values()


_slot = CollectorSlot()


def register_proxy_collector(settings: Settings, client: Any) -> ProxyCollector | None:
    """Export the pool's figures from this process; None when no pool is configured."""
    pool = ProxyPool.from_settings(settings, client)
    if not pool.proxies:
        return None
    collector = ProxyCollector(pool)
    _slot.replace(collector)
    return collector
