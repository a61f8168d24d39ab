"""Users' spiders under faults (issue 18 item 2): a crawler killed mid-crawl loses no item, and a
spider from SPIDER_MODULES sends its pages and dict items, its bug dead-lettering one page only."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.test_crawler_helpers import crawler_started, progress, seed, settled
from tests.e2e.user_spider_module import FAILING_PATH
from tests.support.cluster import TestCluster
from tests.support.kafka import TopicReader
from tests.support.services import wait_until
from utils.demosite import SiteServer, generate_catalogue
from utils.services import LocalServices, free_port

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(240)]

RECOVERY = {"QUEUE_HITS": 0, "LEASE_TIMEOUT": 4, "REAPER_INTERVAL": 0.5, "CONCURRENT_REQUESTS": 4,
            "SPIDER_MODULES": "tests.e2e.user_spider_module"}  # fmt: skip


@pytest.fixture
def user_cluster(services: LocalServices, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[TestCluster]:
    cluster = TestCluster(services, tmp_path, **{**RECOVERY, **getattr(request, "param", {})})
    yield cluster
    cluster.stop_all()
    report = getattr(request.node, "rep_call", None)
    if report is not None and report.failed:
        print("\n".join(cluster.logs()))


def reader(cluster: TestCluster, suffix: str) -> TopicReader:
    return TopicReader(cluster.settings.get_list("KAFKA_HOSTS")[0], cluster.settings.topic(suffix))


def test_a_shop_crawler_killed_mid_crawl_loses_no_item(user_cluster: TestCluster) -> None:
    site, catalogue = generate_catalogue(f"127.18.0.3:{free_port()}", products=200, per_page=10, comma_prices=0)
    expected = {p.sku for p in catalogue.valid()}
    items = reader(user_cluster, "items")
    user_cluster.start("redis-monitor")
    victim = user_cluster.start("crawl", "--spider", "shop")
    wait_until(lambda: crawler_started(user_cluster, 1, "shop"), timeout=60, message="crawler did not start")
    try:
        with SiteServer(site, delay=0.2):  # 4 downloads at a time: ~10 s of crawl
            seed(user_cluster, catalogue.seed_url, crawlid="kill", spiderid="shop", maxdepth=50)
            items.wait_for(lambda got: len(got) >= len(expected) // 4, timeout=60, message="no items")
            victim.kill()
            assert len(items.messages) < len(expected)  # it died mid-crawl
            user_cluster.start("crawl", "--spider", "shop")
            items.wait_for(lambda got: {m["item"]["sku"] for m in got} >= expected, timeout=120,
                           message="items were lost")  # fmt: skip
            wait_until(lambda: settled(progress(user_cluster, "kill", "shop")), timeout=60)
        counts = progress(user_cluster, "kill", "shop")
        skus = Counter(m["item"]["sku"] for m in items.messages)
    finally:
        items.close()
    assert set(skus) == expected
    assert counts.get("reaped", 0) > 0  # the victim's leases came back through the reaper
    print(f"\n[kill] {len(expected)} items expected, lost 0, sent again {sum(skus.values()) - len(skus)}")


@pytest.mark.parametrize("user_cluster", [{"KAFKA_APPID_TOPICS": "true"}], indirect=True)
def test_a_spider_from_spider_modules_sends_pages_and_items_and_its_bug_dead_letters_one_page(
    user_cluster: TestCluster,
) -> None:
    site, catalogue = generate_catalogue(f"127.18.0.4:{free_port()}", products=60, per_page=10)
    listings = [catalogue.seed_url] + [catalogue.url(f"/shop/page/{n}.html") for n in range(2, 7)]
    failing = catalogue.url(FAILING_PATH)
    pages, items, dead = reader(user_cluster, "crawled_firehose"), reader(user_cluster, "items"), \
        reader(user_cluster, "dead_letter")  # fmt: skip
    app_items = reader(user_cluster, "items_testapp")  # KAFKA_APPID_TOPICS: the appid's own topic too
    user_cluster.start("crawl", "--spider", "pages_and_items")
    wait_until(lambda: crawler_started(user_cluster, 1, "pages_and_items"), timeout=60, message="no crawler")
    try:
        with SiteServer(site):
            seed(user_cluster, catalogue.seed_url, crawlid="pages", spiderid="pages_and_items", maxdepth=50)
            wait_until(lambda: settled(progress(user_cluster, "pages", "pages_and_items")), timeout=60)
            pages.wait_for(lambda got: len(got) >= 3, timeout=30)
            dead.wait_for(lambda got: len(got) >= 1, timeout=30)
            items.wait_for(lambda got: len(got) >= 2, timeout=30)
            app_items.wait_for(lambda got: len(got) >= 2, timeout=30)
            for topic in (pages, items, dead, app_items):
                topic.poll(1.0)
        counts = progress(user_cluster, "pages", "pages_and_items")
    finally:
        for topic in (pages, items, dead, app_items):
            topic.close()
    # The chain of listing pages stops at the page whose parse raised: it has a page message, no item.
    crawled = listings[: listings.index(failing) + 1]
    assert sorted(p["url"] for p in pages.messages) == sorted(crawled)
    assert all(p["success"] and p["spiderid"] == "pages_and_items" for p in pages.messages)
    assert [m["item"]["listing"] for m in items.messages] == crawled[:-1]
    assert {m["item_type"] for m in items.messages} == {"dict"}
    assert app_items.messages == items.messages
    assert [(d["url"], d["error"]) for d in dead.messages] == [(failing, f"RuntimeError: no parser for {FAILING_PATH}")]
    assert counts["crawled"] == len(crawled) - 1
