"""The crawler's middlewares on a real `shoal crawl`: robots.txt (obeyed, Crawl-delay shared by the
cluster), Retry-After holding a domain back, per-status stats and the heartbeat."""

from __future__ import annotations

import socket
from datetime import datetime

import pytest

from tests.e2e.test_crawler_fields import start_crawler
from tests.e2e.test_crawler_helpers import EchoServer, progress, seed, settled
from tests.support.cluster import TestCluster
from tests.support.services import wait_until
from utils.config.clients import redis_client
from utils.demosite import SiteServer, generate_site
from utils.frontier import keys, throttle_state
from utils.services import free_port

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]


@pytest.mark.parametrize("cluster", [{"QUEUE_HITS": 0, "STATS_CYCLE": 0.2}], indirect=True)
def test_robots_txt_is_obeyed_and_its_crawl_delay_spaces_the_domain_hits(cluster: TestCluster, topic_reader) -> None:
    site = generate_site(hosts=1, pages_per_host=40, seed=3, base_ip_octet=147, port=free_port(), crawl_delay=0.25)
    expected = site.reachable(site.seed_urls(), 3, obey_robots=True)
    firehose = topic_reader("crawled_firehose")
    with SiteServer(site) as server:
        start_crawler(cluster)
        seed(cluster, site.seed_urls()[0], crawlid="polite", maxdepth=3, deny_extensions=[])
        wait_until(lambda: settled(progress(cluster, "polite")), timeout=90)
        hits = dict(server.hits)
    pages = firehose.wait_for(lambda got: len(got) >= progress(cluster, "polite")["crawled"], timeout=30)
    assert {p["url"] for p in pages} == set(expected), set(expected) ^ {p["url"] for p in pages}
    assert not any("/private/" in path for _host, path in hits)
    counts = progress(cluster, "polite")
    assert counts["dropped_robots"] == len(site.reachable(site.seed_urls(), 3, obey_robots=False)) - len(expected)
    client = redis_client(cluster.settings, decode=True)
    domain = site.hosts[0].split(":")[0]
    state = throttle_state.read(redis_client(cluster.settings), keys.throttle_key(domain, "link"), domain)
    assert state is not None
    assert state.delay == 0.25
    stamps = sorted(p["timestamp"] for p in pages)  # sent right after each download
    times = [datetime.fromisoformat(s).timestamp() for s in stamps]
    span = times[-1] - times[0]
    assert span >= 0.25 * (len(times) - 1) * 0.9, (span, len(times))
    # per-status stats and the heartbeat, all with TTLs
    host = socket.gethostname()
    wait_until(lambda: client.exists(f"stats:crawler:{host}:link:200:lifetime"), timeout=10)
    assert int(client.get(f"stats:crawler:{host}:link:200:lifetime")) >= len(expected) - 2
    assert client.ttl(f"stats:crawler:{host}:link:200:buckets") > 0
    (beat,) = [k for k in client.scan_iter(f"stats:crawler:{host}:link:*") if k.count(":") == 4]
    assert client.ttl(beat) > 0


@pytest.mark.parametrize("cluster", [{"QUEUE_HITS": 0, "RETRY_BACKOFF_BASE": 0.1}], indirect=True)
def test_a_429_with_retry_after_holds_the_whole_domain_back(cluster: TestCluster, topic_reader) -> None:
    firehose = topic_reader("crawled_firehose")
    with EchoServer("127.0.0.148", free_port("127.0.0.148"), retry_after=2) as echo:
        start_crawler(cluster)
        seed(cluster, f"{echo.base}/busy", crawlid="busy")
        wait_until(lambda: echo.of("/busy"), timeout=30)
        refused_at = echo.of("/busy")[0]["at"]
        for n in range(3):
            seed(cluster, f"{echo.base}/other{n}", crawlid="busy")
        wait_until(lambda: settled(progress(cluster, "busy")), timeout=30)
        later = [r for r in echo.requests if r["at"] > refused_at and not r["target"].endswith("robots.txt")]
    assert len(later) == 4  # the retry of /busy and the three others
    assert min(r["at"] for r in later) - refused_at >= 1.8
    pages = firehose.wait_for(lambda got: len(got) >= 4, timeout=30)
    busy = [p for p in pages if p["url"].endswith("/busy")]
    # a 429 is a block (BLOCK_STATUSES): retried on the ladder's budget, which leaves `attempt` as it was
    assert [(p["status_code"], p["attempt"]) for p in busy] == [(200, 0)]
    assert progress(cluster, "busy")["crawled"] == 4
