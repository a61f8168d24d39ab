"""Per-app figures for Prometheus, read at scrape time from the redis monitor's last refresh
(`shoal:apps:figures`, one HGETALL). Labels are apps, never crawls: at most APPS_SHOWN apps, the
busiest first (by queued plus in flight), so a cluster with many small apps stays bounded.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from redis.exceptions import RedisError

from utils.apps.usage import read_figures
from utils.observability.metrics.registry import CollectorSlot

log = logging.getLogger(__name__)

APPS_SHOWN = 50
QUOTA_LABELS = ["appid", "quota"]
FIGURES = {  # figure -> (metric name, help)
    "queued": ("shoal_app_queued", "An app's requests waiting in the frontier (queued or waiting to retry)"),
    "inflight": ("shoal_app_inflight", "An app's requests leased to crawlers"),
    "pages_per_sec": ("shoal_app_pages_per_second", "An app's pages per second (crawled, failed, dead)"),
    "share": ("shoal_app_share", "An app's share of the cluster's pages per second (0..1)"),
    "running": ("shoal_app_running_crawls", "An app's crawls with work left"),
    "first_page_sec": ("shoal_app_first_page_seconds", "Mean time from a crawl's start to its first page"),
}


class AppsCollector(Collector):
    def __init__(self, client: Any) -> None:
        self.client = client

    def collect(self) -> Iterator[Metric]:
        try:
            figures = read_figures(self.client)
        except RedisError as exc:
            log.warning("App figures unreadable for metrics", extra={"error": str(exc)})
            return
        shown = sorted(figures.values(), key=lambda f: -(int(f.get("queued", 0)) + int(f.get("inflight", 0))))
        families = {k: GaugeMetricFamily(name, text, labels=["appid"]) for k, (name, text) in FIGURES.items()}
        use = GaugeMetricFamily(
            "shoal_app_quota_use", "An app's use of a quota (used / limit)", labels=["appid", "quota"]
        )
        limit = GaugeMetricFamily("shoal_app_quota_limit", "An app's quota", labels=QUOTA_LABELS)
        for app in shown[:APPS_SHOWN]:
            appid = str(app.get("appid"))
            for figure, family in families.items():
                if isinstance(app.get(figure), int | float):
                    family.add_metric([appid], float(app[figure]))
            for quota, value in (app.get("quota_use") or {}).items():
                use.add_metric([appid, quota], float(value))
            for quota, value in (app.get("quota") or {}).items():
                limit.add_metric([appid, quota], float(value))
        yield from families.values()
        yield use
        yield limit


_slot = CollectorSlot()


def register_apps_collector(client: Any) -> AppsCollector:
    """Export the per-app figures from this process (replacing an earlier collector)."""
    collector = AppsCollector(client)
    _slot.replace(collector)
    return collector
