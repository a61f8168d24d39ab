"""Scrape-time figures for the alerts of issue 33 (docker/prometheus/alerts.yml): each domain above
level 0 of its spider's ladder, and Redis' memory against its limit. Exported by the redis monitor.
At most LADDER_METRICS_TOP domains per spider, highest levels first, so cardinality stays bounded.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from redis.exceptions import RedisError

from utils.config.settings import Settings
from utils.frontier import keys
from utils.observability.metrics.registry import CollectorSlot

log = logging.getLogger(__name__)

TOP = 100  # domains per spider exported (highest levels first)


def families() -> dict[str, GaugeMetricFamily]:
    return {
        "level": GaugeMetricFamily("shoal_domain_ladder_level", "A domain's level on its block escalation ladder "
                                   "(1 slower, 2 proxied, 3 rendered, 4 paused), above 0 only",
                                   labels=["spiderid", "domain"]),
        "used": GaugeMetricFamily("shoal_redis_memory_used_bytes", "Memory Redis uses (INFO used_memory)"),
        "max": GaugeMetricFamily("shoal_redis_memory_max_bytes", "Redis' maxmemory; 0 = no limit set"),
    }  # fmt: skip


class LadderCollector(Collector):
    def __init__(self, client: Any) -> None:
        self.client = client

    def collect(self) -> Iterator[Metric]:
        found = families()
        try:
            self._read(found)
        except RedisError as exc:
            log.warning("Ladder and Redis memory unreadable for metrics", extra={"error": str(exc)})
            return
        yield from found.values()

    def _read(self, found: dict[str, GaugeMetricFamily]) -> None:
        memory = self.client.info("memory")
        found["used"].add_metric([], float(memory.get("used_memory", 0)))
        found["max"].add_metric([], float(memory.get("maxmemory", 0)))
        for raw in sorted(self.client.smembers(keys.SPIDERS)):
            spiderid = raw.decode() if isinstance(raw, bytes) else str(raw)
            ladder = self.client.zrevrangebyscore(keys.ladder_domains(spiderid), "+inf", 1, start=0, num=TOP,
                                                  withscores=True)  # fmt: skip
            for domain, level in ladder:
                name = domain.decode() if isinstance(domain, bytes) else str(domain)
                found["level"].add_metric([spiderid, name], level)


_slot = CollectorSlot()


def register_ladder_collector(settings: Settings, client: Any) -> LadderCollector:
    """Export the ladder levels and Redis memory from this process (replacing an earlier collector)."""
    del settings  # one signature with the other collectors
    collector = LadderCollector(client)
    _slot.replace(collector)
    return collector
