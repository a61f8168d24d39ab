"""Leases on a real `shoal crawl`: a slow download keeps its lease alive, and a spider stopped with
SIGTERM finishes what it downloads and gives every other lease back at once (issue 5 item 1)."""

from __future__ import annotations

import time

import pytest

from tests.e2e.test_crawler_fields import start_crawler
from tests.e2e.test_crawler_helpers import progress, seed
from tests.support.cluster import TestCluster
from tests.support.services import wait_until
from utils.config.clients import redis_client
from utils.demosite import SiteServer, generate_site
from utils.frontier import keys
from utils.services import free_port

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]


@pytest.fixture
def slow_site():
    site = generate_site(hosts=1, pages_per_host=30, seed=9, base_ip_octet=150, port=free_port())
    with SiteServer(site, delay=2.0) as server:
        yield site, server


def page_urls(site, n: int) -> list[str]:
    return [f"http://{site.hosts[0]}/page/{i}.html" for i in range(n)]


@pytest.mark.parametrize(
    "cluster", [{"QUEUE_HITS": 0, "CONCURRENT_REQUESTS": 2, "SCHEDULER_POP_BATCH": 8, "LEASE_TIMEOUT": 600}],
    indirect=True,
)  # fmt: skip
def test_sigterm_returns_every_unfinished_lease_at_once(cluster: TestCluster, slow_site, topic_reader) -> None:
    site, server = slow_site
    client = redis_client(cluster.settings)
    start_crawler(cluster)
    crawler = cluster.components[-1]
    for url in page_urls(site, 20):
        seed(cluster, url, crawlid="term")
    wait_until(lambda: client.zcard(keys.inflight("link")) >= 8, timeout=30)
    wait_until(lambda: sum(n for (_h, path), n in server.hits.items() if path.startswith("/page/")), timeout=30)
    stopped_at = time.monotonic()
    assert crawler.stop(timeout=30) == 0
    # The two downloads in progress finish (2 s each) and nothing waits on a lease (600 s), nor on the
    # other 18 pages (18 s more at 2 at a time): the bound leaves a loaded machine's slow exit room.
    assert time.monotonic() - stopped_at < 18
    counts = progress(cluster, "term")
    assert client.zcard(keys.inflight("link")) == 0
    assert counts["inflight"] == 0
    # Downloads under way finish (how many depends on when the signal lands); every other lease
    # is back in the queue at once, none is left in flight, and the crawl did not run to its end.
    assert 1 <= counts["crawled"] < 20
    assert counts["queued"] == 20 - counts["crawled"] == client.zcard(keys.queue("link", site.hosts[0].split(":")[0]))
    pages = topic_reader("crawled_firehose").wait_for(lambda got: len(got) >= counts["crawled"], timeout=30)
    assert len(pages) == counts["crawled"]


@pytest.mark.parametrize("cluster", [{"QUEUE_HITS": 0, "CONCURRENT_REQUESTS": 1, "LEASE_TIMEOUT": 1.5}], indirect=True)
def test_a_download_longer_than_the_lease_keeps_extending_it(cluster: TestCluster, slow_site, topic_reader) -> None:
    site, server = slow_site
    server.delay = 4.0
    client = redis_client(cluster.settings)
    start_crawler(cluster)
    seed(cluster, page_urls(site, 1)[0], crawlid="long")
    wait_until(lambda: client.zcard(keys.inflight("link")) == 1, timeout=30)
    ((member, first_deadline),) = client.zrange(keys.inflight("link"), 0, -1, withscores=True)
    time.sleep(2.5)  # past the first deadline, while the download still runs (4 s)
    deadline = client.zscore(keys.inflight("link"), member)
    assert deadline is not None and deadline > first_deadline + 1  # noqa: PT018
    assert deadline > time.time()
    pages = topic_reader("crawled_firehose").wait_for(lambda got: len(got) >= 1, timeout=30)
    assert [p["attempt"] for p in pages] == [0]
    wait_until(lambda: progress(cluster, "long").get("crawled") == 1, timeout=10)
    assert client.zcard(keys.inflight("link")) == 0
