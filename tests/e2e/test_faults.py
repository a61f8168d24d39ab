"""Fault tests of the crawler side (issue 5 item 5): a spider killed, Redis restarted, the broker
stalled, ZooKeeper stopped, a page that always fails. Each crawl must deliver the exact set of
URLs expected; duplicates caused by replays are allowed, counted and printed.

The services here are private to this module (their own Redis, ZooKeeper and broker), so stopping
one never disturbs another test; each test still restores what it stopped.
"""

from __future__ import annotations

import os
import signal
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.test_crawler_helpers import crawler_started, progress, seed, settled
from tests.support.cluster import TestCluster
from tests.support.kafka import TopicReader
from tests.support.services import SERVICE_START_TIMEOUT, wait_until
from utils.config import default_settings
from utils.config.clients import redis_client
from utils.demosite import SiteServer, generate_site
from utils.frontier import keys
from utils.services import LocalServices, free_port, start_local_services

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(180)]

MAXDEPTH = 10
DEFAULTS = {name: getattr(default_settings, name) for name in ("LEASE_TIMEOUT", "REAPER_INTERVAL")}
# Few downloads at a time on a slow site: each crawl lasts several seconds, so the fault hits it mid-way.
FAST_RECOVERY = {"QUEUE_HITS": 0, "LEASE_TIMEOUT": 4, "REAPER_INTERVAL": 0.5, "RETRY_BACKOFF_BASE": 0.2,
                 "CONCURRENT_REQUESTS": 4}  # fmt: skip


@pytest.fixture(scope="module")
def private_services(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalServices]:
    with start_local_services(tmp_path_factory.mktemp("fault-services"), timeout=SERVICE_START_TIMEOUT) as services:
        yield services


@pytest.fixture(scope="module")
def site_server() -> Iterator[tuple]:
    site = generate_site(hosts=2, pages_per_host=120, seed=21, base_ip_octet=160, port=free_port())
    with SiteServer(site, delay=0.1) as server:
        yield site, server


@pytest.fixture
def fault_cluster(private_services: LocalServices, tmp_path: Path, request: pytest.FixtureRequest):
    cluster = TestCluster(private_services, tmp_path, **{**FAST_RECOVERY, **getattr(request, "param", {})})
    yield cluster
    cluster.stop_all()
    report = getattr(request.node, "rep_call", None)
    if report is not None and report.failed:
        print("\n".join(cluster.logs()))


@pytest.fixture
def topic(fault_cluster: TestCluster) -> Iterator:
    """`topic("crawled_firehose")`: a reader of this test's topic, closed before the services stop."""
    opened: list[TopicReader] = []

    def open_reader(suffix: str) -> TopicReader:
        reader = TopicReader(fault_cluster.settings.get_list("KAFKA_HOSTS")[0], fault_cluster.settings.topic(suffix))
        opened.append(reader)
        return reader

    yield open_reader
    for reader in opened:
        reader.close()


def start(cluster: TestCluster, crawlers: int = 1, monitor: bool = True) -> None:
    if monitor:
        cluster.start("redis-monitor")
    for _ in range(crawlers):
        cluster.start("crawl", "--spider", "link")
    wait_until(lambda: crawler_started(cluster, crawlers), timeout=60, message="crawlers did not start")


def crawl_all(cluster: TestCluster, site, crawlid: str) -> dict[str, int]:
    expected = site.reachable(site.seed_urls(), MAXDEPTH, deny_extensions=())
    for url in site.seed_urls():
        seed(cluster, url, crawlid=crawlid, maxdepth=MAXDEPTH, deny_extensions=[])
    return expected


def mid_crawl(cluster: TestCluster, crawlid: str, expected: dict) -> None:
    """Wait until a fifth of the crawl is done (Redis progress: no consumer lag), and check it goes on."""
    wait_until(lambda: progress(cluster, crawlid).get("crawled", 0) >= len(expected) // 5, timeout=60, interval=0.02)
    counts = progress(cluster, crawlid)
    assert counts.get("queued", 0) + counts.get("inflight", 0) > 0, counts


def assert_every_page_arrived(firehose: TopicReader, expected: dict, crawlid: str, timeout: float = 120) -> Counter:
    """Every expected URL, nothing else; returns the per-URL counts (duplicates > 1)."""
    firehose.wait_for(lambda got: {p["url"] for p in got if p["crawlid"] == crawlid} >= set(expected), timeout)
    firehose.poll(1.0)
    counts = Counter(p["url"] for p in firehose.messages if p["crawlid"] == crawlid)
    assert set(counts) == set(expected), set(counts) ^ set(expected)
    duplicated = sum(n - 1 for n in counts.values())
    print(f"\n[{crawlid}] expected {len(expected)}, lost 0, duplicated {duplicated}")
    return counts


def test_a_spider_killed_mid_crawl_loses_no_page(fault_cluster: TestCluster, site_server, topic) -> None:
    site, _server = site_server
    firehose = topic("crawled_firehose")
    start(fault_cluster, crawlers=2)
    victim = fault_cluster.components[-1]
    expected = crawl_all(fault_cluster, site, "kill")
    mid_crawl(fault_cluster, "kill", expected)
    victim.kill()
    assert_every_page_arrived(firehose, expected, "kill")
    wait_until(lambda: settled(progress(fault_cluster, "kill")), timeout=30)
    assert progress(fault_cluster, "kill").get("reaped", 0) > 0  # the victim's leases came back through the reaper


# The shipped lease settings (LEASE_TIMEOUT renewed every third of it, the reaper every REAPER_INTERVAL):
# a dead spider's leases must come back within 20 s, its last page arrive within 30 s of the kill.
SHIPPED_LEASES = {name: DEFAULTS[name] for name in ("LEASE_TIMEOUT", "REAPER_INTERVAL")}


@pytest.mark.parametrize("fault_cluster", [SHIPPED_LEASES], indirect=True)
def test_a_killed_spiders_pages_all_arrive_within_30_s_on_the_shipped_settings(
    fault_cluster: TestCluster, site_server, topic
) -> None:
    site, _server = site_server
    firehose = topic("crawled_firehose")
    start(fault_cluster, crawlers=2)
    victim = fault_cluster.components[-1]
    expected = crawl_all(fault_cluster, site, "kill30")
    mid_crawl(fault_cluster, "kill30", expected)
    victim.kill()
    killed_at = time.monotonic()
    assert_every_page_arrived(firehose, expected, "kill30", timeout=60)
    last_page = time.monotonic() - killed_at
    print(f"[kill30] LEASE_TIMEOUT {DEFAULTS['LEASE_TIMEOUT']} s: every page arrived {last_page:.1f} s after the kill")
    assert last_page <= 30
    wait_until(lambda: settled(progress(fault_cluster, "kill30")), timeout=30)
    final = progress(fault_cluster, "kill30")
    assert final.get("reaped", 0) > 0  # the victim's leases came back through the reaper
    assert final["crawled"] == len(expected)


def test_a_paused_spider_that_comes_back_loses_no_page_and_counts_none_twice(
    fault_cluster: TestCluster, site_server, topic
) -> None:
    """SIGSTOP (a long GC, a frozen VM) past the lease: its leases are re-queued and crawled by the
    other spider; when it resumes, the pages it finishes are sent (duplicates on the firehose) but
    each request is counted once in the crawl's progress, and nothing is lost."""
    site, _server = site_server
    firehose = topic("crawled_firehose")
    start(fault_cluster, crawlers=2)
    paused = fault_cluster.components[-1]
    expected = crawl_all(fault_cluster, site, "pause")
    mid_crawl(fault_cluster, "pause", expected)
    os.killpg(paused.pid, signal.SIGSTOP)
    try:
        wait_until(lambda: progress(fault_cluster, "pause").get("reaped", 0) > 0, timeout=30,
                   message="the paused spider's leases were not re-queued")  # fmt: skip
        time.sleep(2)  # the other spider takes them over
    finally:
        os.killpg(paused.pid, signal.SIGCONT)
    counts = assert_every_page_arrived(firehose, expected, "pause")
    wait_until(lambda: settled(progress(fault_cluster, "pause")), timeout=30)
    final = progress(fault_cluster, "pause")
    assert final["crawled"] == len(expected), final  # each request counted once, however many pages it made
    assert (final.get("inflight", 0), final.get("queued", 0)) == (0, 0)
    assert paused.alive()
    print(f"[pause] reaped {final['reaped']}, pages sent twice {sum(n - 1 for n in counts.values())}")


def test_a_redis_restart_mid_crawl_is_survived(
    fault_cluster: TestCluster, site_server, topic, private_services: LocalServices
) -> None:
    site, _server = site_server
    firehose = topic("crawled_firehose")
    start(fault_cluster)
    expected = crawl_all(fault_cluster, site, "redis")
    mid_crawl(fault_cluster, "redis", expected)
    private_services.redis.restart()
    assert_every_page_arrived(firehose, expected, "redis")
    wait_until(lambda: settled(progress(fault_cluster, "redis")), timeout=30)


def test_a_stalled_broker_delays_pages_but_loses_none(
    fault_cluster: TestCluster, site_server, topic, private_services: LocalServices
) -> None:
    site, _server = site_server
    firehose = topic("crawled_firehose")
    start(fault_cluster)
    expected = crawl_all(fault_cluster, site, "stall")
    mid_crawl(fault_cluster, "stall", expected)
    private_services.broker.pause()
    try:
        time.sleep(4)  # the stall itself: producers must buffer and retry through it
    finally:
        private_services.broker.resume()
    assert_every_page_arrived(firehose, expected, "stall")
    wait_until(lambda: settled(progress(fault_cluster, "stall")), timeout=30)


@pytest.mark.parametrize("fault_cluster", [{"LEASE_TIMEOUT": 120}], indirect=True)
def test_an_apache_kafka_restart_mid_crawl_loses_and_duplicates_nothing(
    fault_cluster: TestCluster, site_server, topic, private_services: LocalServices
) -> None:
    site, _server = site_server
    firehose = topic("crawled_firehose")
    start(fault_cluster)
    expected = crawl_all(fault_cluster, site, "kafka-restart")
    mid_crawl(fault_cluster, "kafka-restart", expected)
    private_services.broker.restart(90)  # SIGTERM, then the same log dir: offsets and pages are kept
    counts = assert_every_page_arrived(firehose, expected, "kafka-restart")
    wait_until(lambda: settled(progress(fault_cluster, "kafka-restart")), timeout=30)
    assert max(counts.values()) == 1, {url: n for url, n in counts.items() if n > 1}


@pytest.mark.parametrize("fault_cluster", [{"QUEUE_HITS": 1, "QUEUE_WINDOW": 600}], indirect=True)
def test_spiders_keep_crawling_on_the_last_config_with_zookeeper_stopped(
    fault_cluster: TestCluster, site_server, topic, private_services: LocalServices
) -> None:
    import yaml
    from kazoo.client import KazooClient

    site, _server = site_server
    zk = KazooClient(hosts=private_services.zookeeper.address, timeout=6.0)
    zk.start(timeout=10)
    path = fault_cluster.settings.zookeeper_config_path
    fast = {domain.split(":")[0]: {"hits": 1000, "window": 1} for domain in site.hosts}
    zk.ensure_path(path)
    zk.set(path, yaml.safe_dump({"domains": fast, "blacklist": []}).encode())
    zk.stop()
    zk.close()
    firehose = topic("crawled_firehose")
    start(fault_cluster, monitor=False)
    expected = crawl_all(fault_cluster, site, "nozk")
    mid_crawl(fault_cluster, "nozk", expected)  # the override is in force (defaults: 1 per 600 s)
    private_services.zookeeper.stop()
    try:
        assert_every_page_arrived(firehose, expected, "nozk")  # only possible on the ZooKeeper config
        late = fault_cluster.start("crawl", "--spider", "link", name="started-without-zookeeper")
        wait_until(lambda: "Scheduler opened" in late.log_path.read_text(), timeout=60)
        wait_until(lambda: crawler_started(fault_cluster, 2), timeout=30)  # it runs (and beats) on its settings
        assert late.alive()
    finally:
        private_services.zookeeper.start()
        private_services.zookeeper.wait_ready(30)


@pytest.mark.parametrize("fault_cluster", [{"RETRY_TIMES": 2}], indirect=True)
def test_a_page_that_always_fails_is_dead_lettered_and_the_crawl_still_finishes(
    fault_cluster: TestCluster, site_server, topic
) -> None:
    site, server = site_server
    broken = "/page/5.html"
    server.fail_paths[broken] = 500
    firehose = topic("crawled_firehose")
    dead_topic = topic("dead_letter")
    outbound = topic("outbound_firehose")
    try:
        start(fault_cluster)
        before = Counter(server.hits)
        expected = crawl_all(fault_cluster, site, "fail")
        broken_urls = {f"http://{host}{broken}" for host in site.hosts}  # the path fails on every host
        assert broken_urls <= set(expected)
        counts = assert_every_page_arrived(firehose, expected, "fail")
    finally:
        server.fail_paths.pop(broken, None)
    failed = [p for p in firehose.messages if p["url"] in broken_urls and p["crawlid"] == "fail"]
    assert sorted((p["url"], p["success"], p["status_code"], p["attempt"]) for p in failed) == [
        (url, False, 500, 2) for url in sorted(broken_urls)
    ]
    assert all("500" in p["exception"] for p in failed)
    assert [server.hits[(host, broken)] - before[(host, broken)] for host in site.hosts] == [3, 3]  # 1 + 2 retries
    assert max(counts.values()) == 1
    dead_topic.wait_for(lambda got: len(got) >= len(broken_urls), timeout=30)
    dead_topic.poll(1.0)
    letters = sorted((m["url"], m["attempts"], m["status_code"]) for m in dead_topic.messages)
    assert letters == [(url, 3, 500) for url in sorted(broken_urls)]
    stored = redis_client(fault_cluster.settings).lrange(keys.dead_letters("link", "testapp", "fail"), 0, -1)
    assert len(stored) == len(broken_urls)
    wait_until(lambda: settled(progress(fault_cluster, "fail")), timeout=30)
    final = progress(fault_cluster, "fail")
    assert (final["dead"], final["crawled"]) == (len(broken_urls), len(expected) - len(broken_urls))
    finished = outbound.wait_for(
        lambda got: any(m.get("action") == "finished" and m.get("crawlid") == "fail" for m in got), timeout=30
    )
    assert finished
