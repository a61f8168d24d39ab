"""Per-crawl revisit figures as Prometheus gauges, read from PostgreSQL at scrape time (cached).

Registered by the revisit component (`shoal revisit`); dashboards take `max by (appid, crawlid)`
when several export it. One summary query per crawl (utils/freshness/state.py) per CACHE seconds.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from utils.observability.metrics.registry import LABELS, REGISTRY

log = logging.getLogger(__name__)

CACHE = 10.0  # seconds a reading serves scrapes
GAUGES = {  # summary field -> (metric name, help)
    "due_now": ("shoal_revisits_due", "Revisits of a crawl due now (next_due passed, not claimed)"),
    "tracked": ("shoal_revisits_tracked", "Pages of a crawl with revisit state"),
    "lateness_p50_s": ("shoal_revisit_lateness_p50_seconds", "Median delay of a revisit after its due time, last hour"),
    "lateness_p99_s": ("shoal_revisit_lateness_p99_seconds", "99th percentile of that delay, last hour"),
    "not_modified_share": ("shoal_revisit_not_modified_ratio", "Share of revisits answered 304, last hour"),
    "changes_per_hour": ("shoal_revisit_changes_per_hour", "Changed pages found by a crawl in the last hour"),
}


class RevisitCollector(Collector):
    def __init__(self, read: Callable[[], list[dict[str, Any]]]) -> None:
        self.read = read
        self._lock = threading.Lock()
        self._cached: tuple[float, list[dict[str, Any]]] = (0.0, [])

    def describe(self) -> Iterator[Metric]:
        return iter(())

    def collect(self) -> Iterator[Metric]:
        families = {field: GaugeMetricFamily(name, text, labels=["appid", "crawlid"])
                    for field, (name, text) in GAUGES.items()}  # fmt: skip
        for summary in self._readings():
            labels = [LABELS("appid", summary["appid"]), LABELS("crawlid", summary["crawlid"])]
            for field, family in families.items():
                if summary.get(field) is not None:
                    family.add_metric(labels, float(summary[field]))
        yield from families.values()

    def _readings(self) -> list[dict[str, Any]]:
        with self._lock:
            at, readings = self._cached
            if time.monotonic() - at < CACHE:
                return readings
            try:
                readings = self.read()
            except Exception as exc:  # noqa: BLE001 - a scrape never fails for PostgreSQL's sake
                log.warning("Revisit figures not read", extra={"error": repr(exc)})
                readings = []
            self._cached = (time.monotonic(), readings)
            return readings


def register(read: Callable[[], list[dict[str, Any]]]) -> RevisitCollector:
    collector = RevisitCollector(read)
    REGISTRY.register(collector)
    return collector
