"""Faults on the wire: a throttled crawl while one link between a component and a service is cut,
half-open or resetting, through Toxiproxy (tests/support/wire.py), then healed.

After each fault the crawl keeps the rules of tests/e2e/test_chaos.py (tests/support/delivery.py):
every page arrives, every duplicate is a re-queued lease, progress is exact, no dead letter. While
the link is down the component's /metrics names the service it cannot reach
(`shoal_dependency_up{dependency=...} 0`); within 30 s of the heal it is 1 again and every process
is alive. Partitions last PARTITION_S, scaled down from a real 30 s outage to what still outlasts
every client timeout on the link (REDIS_SOCKET_TIMEOUT 10 s, the producer's 15 s request timeout)
and the shipped LEASE_TIMEOUT (15 s), so the faults that lose data (a lease reaped while its
crawler still works on it, a batch the client never got an answer for) happen.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.e2e.test_crawler_helpers import crawler_started, progress, seed, settled
from tests.support.cluster import TestCluster
from tests.support.delivery import check_delivery
from tests.support.kafka import TopicReader
from tests.support.services import wait_until
from tests.support.wire import Wire
from tests.support.wire_cluster import DETECTED_WITHIN_S, HEALED_WITHIN_S, SCRAPE_EVERY_S, Faulted, feed
from utils.config.clients import ensure_topics
from utils.demosite import SiteServer, generate_site
from utils.services import free_port

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(240)]

MAXDEPTH = 10
PARTITION_S = 20.0  # seconds: longer than every client timeout on the link and than LEASE_TIMEOUT
# 6 pages/s per host over 3 hosts: the 300-page crawl lasts ~20 s unfaulted, so every fault finds work in flight.
SETTINGS = {"QUEUE_HITS": 6, "QUEUE_WINDOW": 1, "CONCURRENT_REQUESTS": 4, "KAFKA_TOPIC_PARTITIONS": 3}


@pytest.fixture
def site_server() -> Iterator[tuple]:
    site = generate_site(hosts=3, pages_per_host=100, seed=45, network="127.45.0", base_ip_octet=10, port=free_port())
    with SiteServer(site, delay=0.05) as server:
        yield site, server


@pytest.fixture
def faulted(wire: Wire, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Faulted]:
    cluster = TestCluster(wire.services, tmp_path, **SETTINGS)
    yield Faulted(wire, cluster)
    wire.toxiproxy.reset()  # healed even when the test failed mid-fault
    cluster.stop_all()
    report = getattr(request.node, "rep_call", None)
    if report is not None and report.failed:
        print("\n".join(cluster.logs()))


def crawl_through_fault(
    faulted: Faulted, site, crawlid: str, service: str,
    fault: Callable[[], contextlib.AbstractContextManager[None]], dashboard: bool = False,
) -> str:
    """Crawl the site from its seeds (a crawler and a redis monitor), apply `fault` to a crawler link
    once a fifth is crawled, heal it, and check delivery and the crawler's health (with `dashboard`,
    the dashboard's process card too: amber naming the service, then green); returns the summary."""
    cluster = faulted.cluster
    firehose = TopicReader(cluster.settings.get_list("KAFKA_HOSTS")[0], cluster.settings.topic("crawled_firehose"))
    try:
        ensure_topics(cluster.settings, [cluster.settings.topic("crawled_firehose")])
        faulted.start("redis-monitor", "redis-monitor")
        victim = faulted.start("crawler", "crawl", "--spider", "link")
        wait_until(lambda: crawler_started(cluster), timeout=60, message="the crawler did not start")
        expected = set(site.reachable(site.seed_urls(), MAXDEPTH, deny_extensions=()))
        for url in site.seed_urls():
            seed(cluster, url, crawlid=crawlid, maxdepth=MAXDEPTH, deny_extensions=[])
        wait_until(lambda: progress(cluster, crawlid).get("crawled", 0) >= len(expected) // 5, timeout=60,
                   message="the crawl did not start")  # fmt: skip
        with fault():
            began = time.monotonic()
            wait_until(lambda: faulted.dependency_up(victim, service) == 0, timeout=DETECTED_WITHIN_S,
                       interval=SCRAPE_EVERY_S, message=f"{victim.name} never reported {service} down")  # fmt: skip
            if dashboard:
                wait_until(lambda: faulted.card("crawler")["unreachable"] == {service: 1}, timeout=PARTITION_S,
                           message=f"the dashboard never showed the crawler unable to reach {service}")  # fmt: skip
            time.sleep(max(PARTITION_S - (time.monotonic() - began), 0))
        healed = time.monotonic()
        wait_until(lambda: faulted.dependency_up(victim, service) == 1, HEALED_WITHIN_S, interval=SCRAPE_EVERY_S,
                   message=f"{victim.name} reports {service} down {HEALED_WITHIN_S:g} s after the heal")  # fmt: skip
        recovered = time.monotonic() - healed
        assert faulted.outages(victim, service) >= 1  # the metrics counted the outage
        if dashboard:
            wait_until(lambda: faulted.card("crawler") == {"unreachable": {}, "late": 0}, timeout=HEALED_WITHIN_S,
                       message="the dashboard still shows the fault")  # fmt: skip
        assert not faulted.dead(), faulted.dead()
        firehose.wait_for(lambda got: {p["url"] for p in got if p["crawlid"] == crawlid} >= expected, timeout=120)
        wait_until(lambda: settled(progress(cluster, crawlid)), timeout=60)
        firehose.poll(2.0)
        pages = [p for p in firehose.messages if p["crawlid"] == crawlid]
        summary = check_delivery(pages, expected, progress(cluster, crawlid))
        assert not faulted.dead(), faulted.dead()
    finally:
        firehose.close()
    line = f"[{crawlid}] {summary}; {service} up again {recovered:.1f} s after the heal"
    print("\n" + line)
    return line


def test_a_partition_of_crawler_to_redis_loses_nothing(faulted: Faulted, site_server) -> None:
    site, _server = site_server
    link = Wire.link("crawler", "redis")
    crawl_through_fault(faulted, site, "redis-cut", "redis", lambda: faulted.wire.toxiproxy.partition(link))


def test_tcp_resets_of_crawler_to_redis_mid_script_lose_nothing(faulted: Faulted, site_server) -> None:
    site, _server = site_server
    link = Wire.link("crawler", "redis")
    # every connection is reset as soon as a command (most of them Lua calls: pop, ack, renew) is on it
    crawl_through_fault(faulted, site, "redis-rst", "redis",
                        lambda: faulted.wire.toxiproxy.reset_peer(link))  # fmt: skip


def test_a_partition_of_crawler_to_kafka_loses_nothing(faulted: Faulted, site_server) -> None:
    site, _server = site_server
    link = Wire.link("crawler", "kafka")
    crawl_through_fault(faulted, site, "kafka-cut", "kafka", lambda: faulted.wire.toxiproxy.partition(link),
                        dashboard=True)  # fmt: skip


def test_a_half_open_crawler_to_kafka_link_loses_nothing(faulted: Faulted, site_server) -> None:
    site, _server = site_server
    link = Wire.link("crawler", "kafka")
    crawl_through_fault(faulted, site, "kafka-half", "kafka", lambda: faulted.wire.toxiproxy.half_open(link))


def test_resets_of_kafka_monitor_to_redis_commit_no_batch_redis_never_got(faulted: Faulted, site_server) -> None:
    """Requests fed through Kafka while every kafka monitor -> Redis connection is reset: an offset
    committed for a batch whose writes failed would lose those requests for good."""
    site, _server = site_server
    cluster = faulted.cluster
    bootstrap = cluster.settings.get_list("KAFKA_HOSTS")[0]
    ensure_topics(cluster.settings, [cluster.settings.incoming_topic, cluster.settings.topic("crawled_firehose")])
    firehose = TopicReader(bootstrap, cluster.settings.topic("crawled_firehose"))
    try:
        monitor = faulted.start("kafka-monitor", "kafka-monitor")
        faulted.start("redis-monitor", "redis-monitor")
        faulted.start("crawler", "crawl", "--spider", "link")
        wait_until(lambda: crawler_started(cluster), timeout=60, message="the crawler did not start")
        urls = sorted(site.reachable(site.seed_urls(), MAXDEPTH, deny_extensions=()))[:150]
        base = {"appid": "testapp", "crawlid": "km-rst", "maxdepth": 0, "deny_extensions": []}
        with faulted.wire.toxiproxy.reset_peer(Wire.link("kafka-monitor", "redis")):
            feed(bootstrap, cluster.settings.incoming_topic, [{**base, "url": u} for u in urls])
            wait_until(lambda: faulted.dependency_up(monitor, "redis") == 0, timeout=DETECTED_WITHIN_S,
                       interval=SCRAPE_EVERY_S, message="the kafka monitor never reported redis down")  # fmt: skip
            time.sleep(5)
        wait_until(lambda: faulted.dependency_up(monitor, "redis") == 1, timeout=HEALED_WITHIN_S,
                   interval=SCRAPE_EVERY_S)  # fmt: skip
        assert faulted.outages(monitor, "redis") >= 1
        firehose.wait_for(lambda got: {p["url"] for p in got if p["crawlid"] == "km-rst"} >= set(urls), timeout=120)
        wait_until(lambda: settled(progress(cluster, "km-rst")), timeout=60)
        firehose.poll(2.0)
        pages = [p for p in firehose.messages if p["crawlid"] == "km-rst"]
        print("\n[km-rst] " + check_delivery(pages, set(urls), progress(cluster, "km-rst")))
        assert not faulted.dead(), faulted.dead()
    finally:
        firehose.close()
