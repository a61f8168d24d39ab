"""Sitemaps discovered and watched (issue 31, item 4) on a real `shoal crawl` process.

The demo site serves robots.txt naming a sitemap index of 5 gzip sitemaps x 10,000 URLs, each file
with an ETag and Last-Modified (utils/demosite/sitemaps.py). The domain is throttled to a few pages
a second so the listed pages (priority below the sitemaps') barely start while the test looks at
what was queued: the crawl's `enqueued` counter, the sitemaps' page messages, the stored requests.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from typing import Any

import pytest

from tests.e2e.test_crawler_fields import start_crawler
from tests.e2e.test_crawler_helpers import progress
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
        payload=crawl_request.encode(record), seed=True,
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
    payloads = client.hvals(keys.crawl_requests("link", "testapp", crawlid))
    return Counter(json.loads(p)["url"] for p in payloads)


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
