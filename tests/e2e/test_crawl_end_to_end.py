"""The spine: a crawl request on Kafka becomes every reachable page of a 3-host site on the firehose.

Real processes (`shoal kafka-monitor`, `shoal crawl`) against real Redis, ZooKeeper and the broker;
the site is the project's generator served on loopback.
"""

from __future__ import annotations

import base64
from collections import Counter
from datetime import datetime
from urllib.parse import urlsplit

import pytest

from tests.support.cluster import TestCluster
from tests.support.kafka import produce
from utils.config.clients import redis_client
from utils.demosite import SiteServer, generate_site
from utils.frontier import keys
from utils.services import free_port

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(240)]

MAXDEPTH = 10
ATTRS = {"purpose": "e2e", "n": 7}


@pytest.fixture
def site_server():
    site = generate_site(hosts=3, pages_per_host=200, seed=7, base_ip_octet=30, port=free_port())
    with SiteServer(site) as server:
        yield site, server


@pytest.mark.parametrize("cluster", [{"QUEUE_HITS": 1000, "QUEUE_WINDOW": 1, "QUEUE_MODERATED": False}], indirect=True)
def test_every_reachable_page_arrives_once_with_its_fields(cluster: TestCluster, site_server, topic_reader) -> None:
    site, server = site_server
    seeds = site.seed_urls()
    expected = site.reachable(seeds, MAXDEPTH, obey_robots=True)
    assert len(expected) >= 600
    assert len({urlsplit(u).hostname for u in expected}) == 3

    cluster.start("kafka-monitor")
    cluster.start("crawl", "--spider", "link")
    firehose = topic_reader("crawled_firehose")
    requests = [
        {
            "url": seed,
            "appid": "e2eapp",
            "crawlid": "spine1",
            "maxdepth": MAXDEPTH,
            "attrs": ATTRS,
            "deny_extensions": [],
        }
        for seed in seeds
    ]
    produce(cluster.settings.get_list("KAFKA_HOSTS")[0], cluster.settings.incoming_topic, requests)

    pages = firehose.wait_for(
        lambda got: len(got) >= len(expected), timeout=180, message=f"expected {len(expected)} pages"
    )
    firehose.poll(2.0)  # anything extra (a duplicate) would arrive now

    counts = Counter(page["url"] for page in pages)
    assert set(counts) == set(expected), (set(expected) - set(counts), set(counts) - set(expected))
    assert [url for url, n in counts.items() if n > 1] == []
    for page in pages:
        assert_page_matches_site(page, site, expected[page["url"]])
    assert_progress_is_exact(cluster, pages, len(seeds), len(expected))


def assert_progress_is_exact(cluster: TestCluster, pages: list, seeds: int, crawled: int) -> None:
    """Every link a page listed (and every seed) is counted once: queued or dropped by reason."""
    raw = redis_client(cluster.settings, decode=True).hgetall(keys.crawl_progress("link", "e2eapp", "spine1"))
    counts = {k: int(float(v)) for k, v in raw.items() if k not in {"spiderid", "appid", "crawlid"}}
    found = seeds + sum(len(page["links"]) for page in pages)
    dropped = sum(n for name, n in counts.items() if name.startswith("dropped_") and name != "dropped_robots")
    assert counts["enqueued"] + dropped == found
    assert counts["crawled"] == crawled
    assert counts["enqueued"] == crawled + counts.get("dropped_robots", 0)
    assert (counts["queued"], counts["inflight"]) == (0, 0)


def assert_page_matches_site(page: dict, site, depth: int) -> None:
    source = site.pages[page["url"]]
    assert page["status_code"] == source.status
    assert page["response_url"] == page["url"]
    assert (page["appid"], page["crawlid"], page["attrs"]) == ("e2eapp", "spine1", ATTRS)
    assert page["success"] is True
    datetime.strptime(page["timestamp"], "%Y-%m-%dT%H:%M:%S.%f")  # UTC ISO-8601, no zone
    if page.get("body_encoding") == "base64":
        assert base64.b64decode(page["body"]) == source.body
    else:
        assert page["body"] == source.body.decode("utf-8")
    if source.content_type.startswith("text/html") and source.status == 200 and depth < MAXDEPTH:
        assert {link["url"] for link in page["links"]} == set(source.links)
    else:
        assert page["links"] == []
