"""Sitemaps discovered and watched (issue 31, item 4) on a real `shoal crawl` process.

The demo site serves robots.txt naming a sitemap index of 5 gzip sitemaps x 10,000 URLs, each file
with an ETag and Last-Modified (utils/demosite/sitemaps.py). The domain is throttled to a few pages
a second so the listed pages (priority below the sitemaps') barely start while the test looks at
what was queued: the crawl's `enqueued` counter, the sitemaps' page messages, the stored requests.
"""

from __future__ import annotations

import gzip
import time
from collections import Counter
from typing import Any

import pytest

from tests.e2e.test_crawler_fields import start_crawler
from tests.e2e.test_crawler_helpers import progress, settled
from tests.support.cluster import TestCluster
from tests.support.services import wait_until
from utils import schemas
from utils.config.clients import redis_client
from utils.demosite import SiteServer, generate_site
from utils.demosite.sitemaps import SitemapSet
from utils.frontier import Frontier, NewRequest, crawl_request, keys
from utils.frontier.domains import url_domain
from utils.frontier.fingerprint import fingerprint
from utils.services import free_port

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(150)]

SLOW = {"QUEUE_HITS": 3, "QUEUE_WINDOW": 1}  # the listed pages trickle; the sitemaps go first (higher priority)


def feed(cluster: TestCluster, url: str, crawlid: str, **fields: Any) -> None:
    """One crawl request queued as the kafka monitor queues it (`refetch`: past the dupefilter)."""
    message = schemas.validate("crawl", {"url": url, "appid": "testapp", "crawlid": crawlid, **fields})
    record = crawl_request.to_record(message)
    entry = NewRequest(
        spiderid="link", domain=url_domain(url), priority=record["priority"], appid="testapp", crawlid=crawlid,
        **crawl_request.encode(record)._asdict(), seed=True,
        fingerprint=None if message.get("refetch") else fingerprint(url),
    )  # fmt: skip
    frontier = Frontier.from_settings(cluster.settings, redis_client(cluster.settings))
    assert frontier.enqueue([entry]) == ["queued"]


def polls(firehose: Any, url: str) -> list[dict[str, Any]]:
    """The page messages of `url` read so far, oldest first."""
    firehose.poll(0.2)
    return [m for m in firehose.messages if isinstance(m, dict) and m.get("url") == url]


def wait_for_polls(firehose: Any, url: str, count: int, timeout: float = 40) -> dict[str, Any]:
    wait_until(lambda: len(polls(firehose, url)) >= count, timeout=timeout, interval=0.2,
               message=f"{url} not polled {count} times")  # fmt: skip
    return polls(firehose, url)[count - 1]


def stored_urls(cluster: TestCluster, crawlid: str) -> Counter[str]:
    """URL -> how many requests of the crawl hold it (queued or in flight)."""
    client = redis_client(cluster.settings)
    found: Counter[str] = Counter()
    for domain in client.smembers(keys.crawl_domains("link", "testapp", crawlid)):
        payloads = client.hvals(keys.crawl_requests("link", "testapp", crawlid, domain.decode()))
        found.update(crawl_request.decode(p)["url"] for p in payloads)
    return found


@pytest.mark.slow
@pytest.mark.parametrize("cluster", [SLOW], indirect=True)
def test_an_index_of_five_gzip_sitemaps_queues_50000_then_nothing_then_exactly_the_moved(
    cluster: TestCluster, topic_reader
) -> None:
    site = generate_site(hosts=1, pages_per_host=20, seed=31, base_ip_octet=171, port=free_port())
    sitemaps = SitemapSet(site.hosts[0], files=5, per_file=10_000)
    firehose = topic_reader("crawled_firehose")
    with SiteServer(site, sitemaps=sitemaps):
        start_crawler(cluster)
        started = time.monotonic()
        feed(cluster, site.seed_urls()[0], "sm", sitemaps=True)  # robots.txt -> the index -> 5 parts
        parts = [wait_for_polls(firehose, sitemaps.part_url(k), 1) for k in range(5)]
        took = time.monotonic() - started
        assert [p["sitemap"]["queued"] for p in parts] == [10_000] * 5
        assert all(p["sitemap"]["kind"] == "urlset" and p["sitemap"]["moved"] == 0 for p in parts)
        wait_until(lambda: progress(cluster, "sm").get("enqueued", 0) >= 50_007, timeout=20)
        enqueued = progress(cluster, "sm")["enqueued"]
        assert enqueued == 1 + 1 + 5 + 50_000  # seed, index, parts, listed pages
        print(f"\n[sitemaps] 50,000 URLs from 5 x .xml.gz queued {took:.1f} s after the seed")

        # A re-poll of the unchanged index: with its validators one 304; without, one 200 that queues 0.
        index = polls(firehose, sitemaps.index_url)[0]
        etag = index["response_headers"]["Etag"][0]
        feed(cluster, sitemaps.index_url, "sm", sitemaps=True, refetch=True, headers={"If-None-Match": etag})
        assert wait_for_polls(firehose, sitemaps.index_url, 2)["status_code"] == 304
        feed(cluster, sitemaps.index_url, "sm", sitemaps=True, refetch=True)
        again = wait_for_polls(firehose, sitemaps.index_url, 3)
        assert again["status_code"] == 200
        assert again["sitemap"]["queued"] == 0
        assert again["sitemap"]["unchanged"] == 5
        time.sleep(0.5)  # a flush interval and more: nothing else arrives
        assert progress(cluster, "sm")["enqueued"] == enqueued + 2  # the two index polls themselves

        # Ten lastmods move (two in each part): the parts are polled again and queue exactly those ten.
        moved = sitemaps.move(10)
        feed(cluster, sitemaps.index_url, "sm", sitemaps=True, refetch=True)
        assert wait_for_polls(firehose, sitemaps.index_url, 4)["sitemap"]["queued"] == 5
        repolled = [wait_for_polls(firehose, sitemaps.part_url(k), 2) for k in range(5)]
        assert sum(p["sitemap"]["queued"] for p in repolled) == 10
        assert all(p["sitemap"]["moved"] == 2 and p["sitemap"]["unchanged"] == 9_998 for p in repolled)
        assert all("If-None-Match" in p["request_headers"] for p in repolled)  # conditional GETs
        wait_until(lambda: progress(cluster, "sm")["enqueued"] >= enqueued + 2 + 1 + 5 + 10, timeout=10)
        time.sleep(0.5)
        assert progress(cluster, "sm")["enqueued"] == enqueued + 2 + 1 + 5 + 10
        twice = {url for url, n in stored_urls(cluster, "sm").items() if n == 2}
        assert twice == set(moved)  # queued again past the dupefilter: exactly the moved ones
        client = redis_client(cluster.settings)
        states = list(client.scan_iter(keys.sitemap_seen("link", "testapp", "sm", "*")))
        assert len(states) == 6  # the index and its five parts, each expiring SITEMAP_STATE_TTL after its poll
        assert all(0 < client.ttl(key) <= 30 * 86400 for key in states)


def hostile_routes(host: str) -> dict[str, tuple[int, str, bytes]]:
    """robots.txt naming a good sitemap and four hostile ones; every file on the demo site's host."""
    ns = 'xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"'
    good = "".join(f"<url><loc>http://{host}/good/{i}.html</loc></url>" for i in range(10))
    good += f"<url><loc>http://{host}/private/secret.html</loc></url>"  # robots.txt disallows it
    other = (f"<url><loc>http://evil.example/a</loc></url><url><loc>https://127.0.0.2/b</loc></url>"
             f"<url><loc>http://{host}/other/far.html</loc><lastmod>9999-12-31</lastmod></url>"
             f"<url><loc>http://{host}/other/ok.html</loc></url>")  # fmt: skip
    levels = "".join(f'<!ENTITY l{n} "{f"&l{n - 1};" * 10}">' for n in range(1, 10))
    bomb = f'<?xml version="1.0"?><!DOCTYPE u [<!ENTITY l0 "lol">{levels}]>'
    bomb += f"<urlset {ns}><url><loc>&l9;</loc></url></urlset>"
    member = gzip.compress(f"<url><loc>http://{host}/big/x.html</loc></url>".encode() * (8 << 20 >> 5), 9)
    big = gzip.compress(f"<urlset {ns}>".encode()) + member * 128  # 1 GiB of XML in ~4 MB
    own = f"<sitemapindex {ns}><sitemap><loc>http://{host}/self.xml</loc></sitemap></sitemapindex>"
    robots = "User-agent: *\nDisallow: /private/\n" + "".join(
        f"Sitemap: http://{host}/{name}\n" for name in ("bomb.xml", "big.xml.gz", "self.xml", "other.xml", "good.xml")
    )
    return {
        "/robots.txt": (200, "text/plain", robots.encode()),
        "/good.xml": (200, "application/xml", f"<urlset {ns}>{good}</urlset>".encode()),
        "/other.xml": (200, "application/xml", f"<urlset {ns}>{other}</urlset>".encode()),
        "/bomb.xml": (200, "application/xml", bomb.encode()),
        "/big.xml.gz": (200, "application/gzip", big),
        "/self.xml": (200, "application/xml", own.encode()),
    }


@pytest.mark.parametrize("cluster", [{"QUEUE_HITS": 0, "SITEMAP_URLS_MAX": 1000}], indirect=True)
def test_hostile_sitemaps_end_in_an_error_or_are_bounded_and_counted_and_hold_nothing_up(
    cluster: TestCluster, topic_reader
) -> None:
    site = generate_site(hosts=1, pages_per_host=15, seed=32, base_ip_octet=172, port=free_port())
    host = site.hosts[0]
    firehose = topic_reader("crawled_firehose")
    with SiteServer(site, extra_routes=hostile_routes(host)) as server:
        start_crawler(cluster)
        feed(cluster, site.seed_urls()[0], "hostile", sitemaps=True, maxdepth=1, deny_regex=[r"/good/9\.html$"])
        summary = {name: wait_for_polls(firehose, f"http://{host}/{name}", 1)["sitemap"]
                   for name in ("good.xml", "other.xml", "bomb.xml", "big.xml.gz", "self.xml")}  # fmt: skip
        wait_until(lambda: settled(progress(cluster, "hostile")), timeout=60)
        firehose.poll(1.0)
    assert summary["good.xml"]["queued"] == 9
    assert summary["good.xml"]["filtered"] == 2  # the crawl's deny_regex; robots.txt, as Scrapy read it for the seed
    assert summary["other.xml"]["other_host"] == 2
    assert summary["other.xml"]["bad_lastmod"] == 1
    assert summary["other.xml"]["queued"] == 2  # on the host: queued, the year-9999 lastmod ignored
    assert summary["bomb.xml"]["queued"] == 0
    assert "amplification" in summary["bomb.xml"]["error"]
    assert summary["big.xml.gz"]["truncated"]
    assert summary["big.xml.gz"]["entries"] == 1000
    assert summary["big.xml.gz"]["over_limit"] > 900_000  # counted up to 50 MiB of XML (57-byte entries)
    assert summary["big.xml.gz"]["queued"] == 1  # one URL, listed over and over
    assert summary["self.xml"]["kind"] == "sitemapindex"
    assert server.hits[(host, "/self.xml")] == 1  # listing itself: a duplicate of itself, read once
    crawled = {m["url"] for m in firehose.messages if isinstance(m, dict)}
    assert {f"http://{host}/good/{i}.html" for i in range(9)} <= crawled
    assert f"http://{host}/good/9.html" not in crawled
    assert f"http://{host}/private/secret.html" not in crawled
    assert set(site.reachable(site.seed_urls()[:1], 1, allowed_hosts=None)) <= crawled  # the crawl went on
