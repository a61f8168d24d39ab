"""Scale-down that loses nothing (issue 32): of two crawlers on the real services, one gets SIGTERM
mid-crawl, as Kubernetes sends it when an autoscaler removes a pod. It stops leasing, gives back
what it holds within 2 s (not after the 20 s heartbeat or a lease timeout), flushes Kafka and
exits within 10 s; the other crawler finishes the crawl, and every page arrives exactly once."""

from __future__ import annotations

import json
import time
from collections import Counter

import pytest

from tests.e2e.test_crawler_fields import start_crawler
from tests.e2e.test_crawler_helpers import crawler_started, progress, seed, settled
from tests.support.cluster import TestCluster
from tests.support.services import wait_until
from utils.config.clients import redis_client
from utils.demosite import SiteServer, generate_site
from utils.frontier import keys
from utils.services import free_port

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(180)]

HOSTS, PAGES = 4, 5
DOWNLOAD = 2.5  # seconds per page: downloads under way outlast the 2 s the leases may take to come back


@pytest.fixture
def slow_site():
    site = generate_site(hosts=HOSTS, pages_per_host=PAGES, seed=32, base_ip_octet=160, port=free_port())
    with SiteServer(site, delay=DOWNLOAD):
        yield site


RETURNS = ("Returned waiting leases on stopping", "Scheduler closed")  # the log lines that count them


def released(log: str) -> list[int]:
    """`released_leases` of each of the crawler's lines that return leases, in order."""
    return [int(e["released_leases"]) for e in map(json.loads, log.splitlines()) if e.get("message") in RETURNS]


@pytest.mark.parametrize(
    "cluster", [{"QUEUE_HITS": 0, "CONCURRENT_REQUESTS": 4, "SCHEDULER_POP_BATCH": 12, "LEASE_TIMEOUT": 600}],
    indirect=True,
)  # fmt: skip: a lease timeout far past the test, so only the release can bring leases back
def test_sigterm_of_one_of_two_crawlers_returns_its_leases_and_loses_nothing(
    cluster: TestCluster, slow_site, topic_reader
) -> None:
    site = slow_site
    client = redis_client(cluster.settings)
    firehose = topic_reader("crawled_firehose")
    start_crawler(cluster)
    leaving = cluster.components[-1]
    urls = [f"http://{host}/page/{i}.html" for host in site.hosts for i in range(PAGES)]
    for url in urls:
        seed(cluster, url, crawlid="down")
    # The first crawler leases a batch (SCHEDULER_POP_BATCH) while it downloads four: it holds
    # leases it has not started when the second one is up and the first gets SIGTERM.
    wait_until(lambda: client.zcard(keys.inflight("link")) >= 12, timeout=30)
    cluster.start("crawl", "--spider", "link")
    wait_until(lambda: crawler_started(cluster, 2), timeout=30, message="the second crawler did not start")

    term_at = time.monotonic()
    leaving.process.terminate()  # SIGTERM, as the kubelet sends it
    wait_until(lambda: released(leaving.log_path.read_text(errors="replace")), timeout=10, interval=0.02)
    returned_after = time.monotonic() - term_at
    leaving.process.wait(10)
    exited_after = time.monotonic() - term_at

    assert returned_after < 2.0, f"leases back after {returned_after:.2f} s"
    assert sum(released(leaving.log_path.read_text(errors="replace"))) > 0  # it held leases it had not started
    assert exited_after < 10.0, f"exit after {exited_after:.2f} s"
    assert leaving.process.returncode == 0
    wait_until(lambda: settled(progress(cluster, "down")), timeout=90, message="the other crawler did not finish")
    pages = firehose.wait_for(lambda got: len(got) >= len(urls), timeout=30)
    time.sleep(1.0)  # a page sent twice would arrive now
    pages = firehose.wait_for(lambda got: len(got) >= len(urls), timeout=1)
    counts = Counter(page["url"] for page in pages)
    assert set(counts) == set(urls)
    assert max(counts.values()) == 1, [url for url, n in counts.items() if n > 1]
    assert client.zcard(keys.inflight("link")) == 0
    assert progress(cluster, "down")["crawled"] == len(urls)
