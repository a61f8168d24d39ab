"""Sitemap ingest (issue 31): 50,000 URLs from one `.xml.gz` queued, timed from the crawl request.

A kafka monitor and a link crawler on private services; the demo site serves one gzip sitemap of
50,000 URLs (utils/demosite/sitemaps.py). A crawl request naming it (`"sitemaps": <its URL>`) is
produced to `<prefix>.incoming`; the clock stops when the crawl's `enqueued` counter holds the
sitemap and its 50,000 URLs. Then the same request is fed again with `refetch` (a re-poll of an
unchanged sitemap: 200, its 50,000 entries diffed, 0 queued) and once more after 10 lastmods moved
(10 queued). The listed pages are throttled to a trickle so the figure is the ingest path's:
fetch, bounded gunzip, parse, Redis diff, 50,000 requests through the scheduler into the frontier.
Target: <= 20 s. Run: `python -m bench.sitemap_ingest`.
"""

from __future__ import annotations

import json
import time
from typing import Any

from confluent_kafka import Producer

from bench.common import bench_cluster, print_checks, write_result
from tests.support.cluster import TestCluster
from utils.config.clients import redis_client
from utils.demosite import SiteServer, generate_site
from utils.demosite.sitemaps import SitemapSet
from utils.frontier import keys
from utils.services import free_port

URLS = 50_000
TARGET_S = 20.0


def enqueued(cluster: TestCluster, crawlid: str) -> int:
    value = redis_client(cluster.settings).hget(keys.crawl_progress("link", "bench", crawlid), "enqueued")
    return int(float(value or 0))


def wait_for(cluster: TestCluster, crawlid: str, count: int, timeout: float) -> float:
    """Seconds until the crawl's enqueued counter reaches `count` (polled every 20 ms)."""
    started = time.monotonic()
    while enqueued(cluster, crawlid) < count:
        if time.monotonic() - started > timeout:
            raise SystemExit(f"{crawlid}: {enqueued(cluster, crawlid)} of {count} queued after {timeout} s")
        time.sleep(0.02)
    return time.monotonic() - started


def feed(producer: Producer, cluster: TestCluster, message: dict[str, Any]) -> None:
    producer.produce(cluster.settings.incoming_topic, json.dumps({"appid": "bench", **message}))
    producer.flush(10)


def measure() -> dict[str, Any]:
    site = generate_site(hosts=1, pages_per_host=5, seed=4, base_ip_octet=205, port=free_port())
    sitemaps = SitemapSet(site.hosts[0], files=1, per_file=URLS, robots=False)
    url = sitemaps.part_url(0)
    settings = {"QUEUE_HITS": 2, "QUEUE_WINDOW": 1, "LOG_LEVEL": "WARNING"}  # the listed pages trickle
    with SiteServer(site, sitemaps=sitemaps), bench_cluster(**settings) as cluster:
        cluster.start("kafka-monitor")
        cluster.start("crawl", "--spider", "link")
        producer = Producer({"bootstrap.servers": cluster.settings.get_list("KAFKA_HOSTS")[0], "linger.ms": 0})
        feed(producer, cluster, {"url": site.seed_urls()[0], "crawlid": "warmup"})  # group joined, crawler up
        wait_for(cluster, "warmup", 1, timeout=120)
        time.sleep(1.0)
        started = time.monotonic()
        request = {"url": url, "crawlid": "ingest", "sitemaps": url}
        feed(producer, cluster, request)
        first = wait_for(cluster, "ingest", 1 + URLS, timeout=120)
        after_first = enqueued(cluster, "ingest")
        feed(producer, cluster, {**request, "refetch": True})
        time.sleep(0.2)
        wait_for(cluster, "ingest", after_first + 1, timeout=60)  # the sitemap itself
        time.sleep(3.0)  # its 50,000 entries diffed; anything it queued would be counted by now
        unchanged_queued = enqueued(cluster, "ingest") - after_first - 1
        sitemaps.move(10)
        before = enqueued(cluster, "ingest")
        feed(producer, cluster, {**request, "refetch": True})
        wait_for(cluster, "ingest", before + 1 + 10, timeout=60)
        time.sleep(2.0)
        moved_queued = enqueued(cluster, "ingest") - before - 1
    return {"urls": URLS, "seconds_to_queue": round(first, 2), "urls_per_s": round(URLS / first),
            "queued_on_unchanged_repoll": unchanged_queued, "queued_after_10_moved": moved_queued,
            "wall_s": round(time.monotonic() - started, 1)}  # fmt: skip


def main() -> None:
    figures = measure()
    checks = {
        f"50,000 URLs from .xml.gz queued <= {TARGET_S:g} s": figures["seconds_to_queue"] <= TARGET_S,
        "unchanged re-poll queues 0": figures["queued_on_unchanged_repoll"] == 0,
        "10 moved lastmods queue 10": figures["queued_after_10_moved"] == 10,
    }
    path = write_result("sitemap_ingest", figures, checks)
    print(f"sitemap ingest: {figures['urls']:,} URLs queued in {figures['seconds_to_queue']} s "
          f"({figures['urls_per_s']:,}/s); unchanged re-poll queued {figures['queued_on_unchanged_repoll']}, "
          f"10 moved queued {figures['queued_after_10_moved']} -> {path}")  # fmt: skip
    print_checks(checks)


if __name__ == "__main__":
    main()
