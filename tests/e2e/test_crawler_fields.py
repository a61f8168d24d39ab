"""Crawl-request fields on a real `shoal crawl` process: page limits, seed method/headers/body,
cookies, user agent, proxy, expiry, spider routing and the Bloom dupefilter (API.md, issue 4 item 2).
"""

from __future__ import annotations

import json
import time
from collections import Counter

import pytest

from tests.e2e.test_crawler_helpers import EchoServer, crawler_started, echoed, progress, seed, settled
from tests.support.cluster import TestCluster
from tests.support.services import wait_until
from utils.demosite import SiteServer, generate_site
from utils.services import free_port

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]

OPEN = {"QUEUE_HITS": 0}  # unthrottled: these tests are about fields, not pacing


@pytest.fixture(scope="module")
def site_server():
    site = generate_site(hosts=2, pages_per_host=80, seed=11, base_ip_octet=140, port=free_port())
    with SiteServer(site) as server:
        yield site, server


def start_crawler(cluster: TestCluster, spider: str = "link", count: int = 1) -> None:
    for _ in range(count):
        cluster.start("crawl", "--spider", spider)
    wait_until(lambda: crawler_started(cluster, count, spider), timeout=30, message=f"{spider} crawler did not start")


@pytest.mark.parametrize("cluster", [OPEN], indirect=True)
def test_domain_max_pages_yields_exactly_that_many_pages_and_bloom_mode_no_duplicates(
    cluster: TestCluster, site_server, topic_reader
) -> None:
    site, _server = site_server
    firehose = topic_reader("crawled_firehose")
    start_crawler(cluster)
    seed(cluster, site.seed_urls()[0], crawlid="limited", maxdepth=10, domain_max_pages=9)
    seed(cluster, site.seed_urls()[1], crawlid="bloom", maxdepth=10, dupefilter="bloom", deny_extensions=[])
    expected_bloom = site.reachable(site.seed_urls()[1:], 10, allowed_hosts=None)
    wait_until(lambda: settled(progress(cluster, "limited")) and settled(progress(cluster, "bloom")), timeout=60)
    firehose.wait_for(lambda got: len(got) >= 18 + len(expected_bloom), timeout=30)
    firehose.poll(1.0)  # anything extra would arrive now
    limited = [p for p in firehose.messages if p["crawlid"] == "limited"]
    assert Counter(p["url"].split("/")[2] for p in limited) == {host: 9 for host in site.hosts}  # per domain
    assert len({p["url"] for p in limited}) == 18
    counts = progress(cluster, "limited")
    assert counts["crawled"] == 18
    assert counts["dropped_page_limit"] > 0
    bloom = Counter(p["url"] for p in firehose.messages if p["crawlid"] == "bloom")
    assert set(bloom) == set(expected_bloom)
    assert max(bloom.values()) == 1
    assert progress(cluster, "bloom")["crawled"] == len(expected_bloom)
    # Redis round trips per page, as the crawler counts them (pops, flushes, heartbeats, stats)
    crawler = cluster.components[-1]
    assert crawler.stop() == 0
    closing = [json.loads(line) for line in crawler.log_path.read_text().splitlines()
               if '"Scheduler closed"' in line or '"Crawler stats closed"' in line]  # fmt: skip
    trips = sum(entry.get("round_trips", 0) + entry.get("stats_flushes", 0) for entry in closing)
    assert len(closing) == 2
    assert trips / (18 + len(expected_bloom)) <= 3


@pytest.mark.parametrize("cluster", [{**OPEN, "GLOBAL_PAGE_PER_DOMAIN_LIMIT": 5}], indirect=True)
def test_the_global_page_limit_caps_every_crawl_per_domain(cluster: TestCluster, site_server, topic_reader) -> None:
    site, _server = site_server
    firehose = topic_reader("crawled_firehose")
    start_crawler(cluster)
    for url in site.seed_urls():
        seed(cluster, url, crawlid="global", maxdepth=10)
    wait_until(lambda: settled(progress(cluster, "global")), timeout=60)
    firehose.wait_for(lambda got: len(got) >= 5 * len(site.hosts), timeout=30)
    firehose.poll(1.0)
    hosts = Counter(p["url"].split("/")[2] for p in firehose.messages)
    assert hosts == {host: 5 for host in site.hosts}


@pytest.mark.parametrize("cluster", [{**OPEN, "PROXY_REQUEST_ALLOWED": "*"}], indirect=True)  # a loopback proxy
def test_seed_method_headers_body_cookie_useragent_and_proxy_reach_the_server(
    cluster: TestCluster, topic_reader
) -> None:
    firehose = topic_reader("crawled_firehose")
    with EchoServer("127.0.0.145", free_port("127.0.0.145")) as echo:
        start_crawler(cluster)
        seed(cluster, f"{echo.base}/form", crawlid="post", method="POST", headers={"X-Token": "t1"}, body="q=1",
             cookie="session=abc; theme=dark", useragent="ShoalTest/1.0", maxdepth=1, attrs={"k": 1})  # fmt: skip
        seed(cluster, "http://127.0.0.146:9/via-proxy", crawlid="proxied", proxy=echo.base)
        pages = firehose.wait_for(lambda got: len(got) >= 3, timeout=30)
    by_crawl = {(p["crawlid"], p["url"].rsplit("/", 1)[1]): p for p in pages}
    form = echoed(by_crawl[("post", "form")])
    assert (form["method"], form["body"], form["headers"]["X-Token"]) == ("POST", "q=1", "t1")
    assert form["headers"]["User-Agent"] == "ShoalTest/1.0"
    assert form["headers"]["Cookie"] in ("session=abc; theme=dark", "theme=dark; session=abc")
    second = echoed(by_crawl[("post", "second")])  # a child: GET, the crawl's cookie only (no "leak")
    assert (second["method"], second["body"]) == ("GET", "")
    assert "leak" not in second["headers"].get("Cookie", "")
    assert "session=abc" in second["headers"]["Cookie"]
    assert second["headers"]["User-Agent"] == "ShoalTest/1.0"
    assert by_crawl[("post", "second")]["attrs"] == {"k": 1}
    proxied = echoed(by_crawl[("proxied", "via-proxy")])
    assert proxied["target"] == "http://127.0.0.146:9/via-proxy"  # absolute form: sent through the proxy


@pytest.mark.parametrize("cluster", [OPEN], indirect=True)
def test_an_expired_request_is_dropped_and_counted(cluster: TestCluster, site_server, topic_reader) -> None:
    site, server = site_server
    firehose = topic_reader("crawled_firehose")
    start_crawler(cluster)
    seed(cluster, site.seed_urls()[0], crawlid="expired", expires=int(time.time()) - 1)
    seed(cluster, site.seed_urls()[0] + "?fresh", crawlid="fresh", expires=int(time.time()) + 600)
    wait_until(lambda: settled(progress(cluster, "expired")) and settled(progress(cluster, "fresh")), timeout=30)
    firehose.wait_for(lambda got: len(got) >= 1, timeout=30)
    firehose.poll(1.0)
    assert [p["crawlid"] for p in firehose.messages] == ["fresh"]
    assert progress(cluster, "expired")["dropped_expired"] == 1


@pytest.mark.parametrize("cluster", [OPEN], indirect=True)
def test_spiderid_routes_a_crawl_to_the_wandering_spider(cluster: TestCluster, site_server, topic_reader) -> None:
    site, _server = site_server
    firehose = topic_reader("crawled_firehose")
    start_crawler(cluster, "link")
    start_crawler(cluster, "wandering")
    seed(cluster, site.seed_urls()[0], crawlid="walk", spiderid="wandering", attrs={"who": "me"})
    wait_until(lambda: settled(progress(cluster, "walk", "wandering")), timeout=30)
    crawled = progress(cluster, "walk", "wandering")["crawled"]
    firehose.wait_for(lambda got: len(got) >= crawled, timeout=30)
    firehose.poll(1.0)
    walk = firehose.messages
    assert len(walk) >= 2
    assert {p["spiderid"] for p in walk} == {"wandering"}
    assert sorted(p["attrs"]["step"] for p in walk) == list(range(len(walk)))
    assert all(p["attrs"]["who"] == "me" for p in walk)
    assert not progress(cluster, "walk", "link")
