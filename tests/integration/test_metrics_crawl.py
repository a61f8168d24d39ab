"""The frontier metrics move during a real crawl: queue depth and the per-domain backlog rise while
the crawler (throttled) works through the demo site, and fall back to zero when every page is out.

Real `shoal kafka-monitor` and `shoal crawl` processes; the metrics endpoint is this test process's,
exporting the frontier of the cluster's Redis database as the redis monitor will.
"""

from __future__ import annotations

import time
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.support.cluster import TestCluster
from tests.support.frontier_keys import crawl_counters
from tests.support.kafka import produce
from utils.config.clients import redis_client
from utils.demosite import SiteServer, generate_site
from utils.frontier.metrics import register_frontier_collector
from utils.frontier.metrics import unregister_frontier_collector as unregister
from utils.observability.metrics import start_metrics_server, stop_metrics_server
from utils.observability.metrics.registry import STATE
from utils.observability.metrics.server import configure_process
from utils.services import free_port

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

BASE_OCTET = 57  # 127.0.0.57-58: no other test serves there
MAXDEPTH = 3
HITS_PER_SECOND = 15  # per domain: the crawl lasts seconds, long enough to watch the queues
DRAINED_FOR = 1.0  # seconds of empty queues that end the crawl (a parent may be acked just before its links land)


@pytest.fixture
def site_server() -> Iterator[Any]:
    site = generate_site(hosts=2, pages_per_host=60, seed=5, base_ip_octet=BASE_OCTET, port=free_port())
    with SiteServer(site) as server:
        yield site, server


@pytest.fixture
def frontier_url(cluster: TestCluster) -> Iterator[str]:
    """/metrics of this process with the frontier of the cluster's Redis database, read on every scrape."""
    settings = cluster.settings.copy_with(METRICS_FRONTIER_CACHE=0.0)
    before = STATE.component
    register_frontier_collector(settings)
    url = start_metrics_server(settings, "redis-monitor")
    assert url is not None
    yield url
    stop_metrics_server()
    unregister()
    configure_process(settings, before)


def frontier(url: str) -> dict[str, Any]:
    """The link spider's queue depth, in-flight count and domain backlogs from one scrape."""
    with urllib.request.urlopen(url, timeout=5) as answer:
        text = answer.read().decode()
    found: dict[str, Any] = {"queued": 0.0, "inflight": 0.0, "domains": {}, "up": 0.0}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.labels.get("spiderid", "link") != "link":
                continue
            if sample.name == "shoal_queue_depth":
                found["queued"] = sample.value
            elif sample.name == "shoal_inflight_requests":
                found["inflight"] = sample.value
            elif sample.name == "shoal_domain_backlog":
                found["domains"][sample.labels["domain"]] = sample.value
            elif sample.name == "shoal_frontier_up":
                found["up"] = sample.value
    return found


@pytest.mark.parametrize(
    "cluster", [{"QUEUE_HITS": HITS_PER_SECOND, "QUEUE_WINDOW": 1, "QUEUE_MODERATED": False}], indirect=True
)
def test_queue_metrics_rise_during_a_crawl_and_return_to_zero(
    cluster: TestCluster, site_server: Any, topic_reader: Any, frontier_url: str
) -> None:
    site, _server = site_server
    seeds = site.seed_urls()
    expected = site.reachable(seeds, MAXDEPTH, obey_robots=True)
    assert len(expected) >= 60
    assert frontier(frontier_url)["queued"] == 0

    cluster.start("kafka-monitor")
    cluster.start("crawl", "--spider", "link")
    firehose = topic_reader("crawled_firehose")
    requests = [{"url": seed, "appid": "metrics", "crawlid": "m1", "maxdepth": MAXDEPTH} for seed in seeds]
    produce(cluster.settings.get_list("KAFKA_HOSTS")[0], cluster.settings.incoming_topic, requests)

    peaks = {"queued": 0.0, "inflight": 0.0}
    backlog_domains: set[str] = set()
    drained_since: float | None = None
    deadline = time.monotonic() + 90
    while drained_since is None or time.monotonic() - drained_since < DRAINED_FOR:
        assert time.monotonic() < deadline, f"the queues never drained: peaks {peaks}"
        now = frontier(frontier_url)
        assert now["up"] == 1
        peaks = {name: max(peaks[name], now[name]) for name in peaks}
        backlog_domains |= {domain for domain, n in now["domains"].items() if n > 0}
        drained = peaks["queued"] > 0 and now["queued"] == now["inflight"] == 0
        drained_since = (drained_since or time.monotonic()) if drained else None
        firehose.poll(0.1)

    assert peaks["queued"] >= 10, "the backlog of a throttled crawl was never seen"
    assert peaks["inflight"] >= 1
    assert len(backlog_domains) == 2  # both hosts of the site had their own backlog series
    assert now["domains"] == {}
    progress = crawl_counters(redis_client(cluster.settings), "link", "metrics", "m1")
    assert (progress["queued"], progress["inflight"]) == (0, 0)  # the crawl's own counters agree
    settled = int(progress["crawled"]) + int(progress.get("dropped_robots", 0))
    assert settled == int(progress["enqueued"]) >= len(expected) - 5, progress
    firehose.wait_for(lambda got: len(got) >= int(progress["crawled"]), 30)


def cluster_redis(cluster: TestCluster) -> Any:
    return redis_client(cluster.settings)
