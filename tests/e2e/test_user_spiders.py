"""A user's spider package on a cluster under supervisord (issue 18 item 4).

`examples/shop` (installed into the venv by `make install`, found through its `shoal.spiders`
entry point) crawls the demo site's product catalogue on a real `shoal up --spider shop` node:
every valid product arrives exactly once on `<prefix>.items` with its fields, the products missing
a field are dropped by the example's pipeline, and the one product page its naive price parser
chokes on is dead-lettered alone (in Redis, on `<prefix>.dead_letter`, in the crawl's progress).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from tests.support.cluster import REPO
from tests.support.kafka import TopicReader
from tests.support.services import wait_until
from utils.config.clients import redis_client
from utils.config.settings import Settings
from utils.demosite import SiteServer, generate_catalogue
from utils.frontier import keys
from utils.services import LocalServices, free_port

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]

HOST = "127.18.0.1"  # this loopback range
COMPONENTS = ("shoal:kafka-monitor", "shoal:redis-monitor", "shoal:crawler-00")


def shoal(options: list[str], *command: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "utils.cli.main", *options, *command], cwd=REPO, capture_output=True,
                          text=True, timeout=timeout, check=False)  # fmt: skip


def running(options: list[str]) -> set[str]:
    report = json.loads(shoal(options, "status", "--json", "--node", "shop").stdout)
    return {p["name"] for p in report["processes"] if p["state"] == "RUNNING"}


def test_the_example_shop_spider_yields_every_product_once_and_dead_letters_only_its_bug(
    services: LocalServices, tmp_path: Path
) -> None:
    site, catalogue = generate_catalogue(f"{HOST}:{free_port()}", products=120, per_page=12)
    prefix = f"shop{int(time.time() * 1000) % 10**9}"
    options = [
        "-s", f"REDIS_HOST={services.redis.host}", "-s", f"REDIS_PORT={services.redis.port}", "-s", "REDIS_DB=14",
        "-s", f"KAFKA_HOSTS={services.broker.address}", "-s", f"ZOOKEEPER_HOSTS={services.zookeeper.address}",
        "-s", f"ZOOKEEPER_ASSIGN_PATH=/shoal-test/{prefix}/", "-s", f"KAFKA_TOPIC_PREFIX={prefix}",
        "-s", f"KAFKA_GROUP={prefix}-group", "-s", f"RUN_DIR={tmp_path / 'run'}", "-s", f"REST_PORT={free_port()}",
        "-s", "QUEUE_HITS=0", "-s", "SCHEDULER_IDLE_POLL=0.05",
    ]  # fmt: skip
    settings = Settings.load(overrides=[o for o in options if o != "-s"], environ={})
    redis = redis_client(settings, decode=True)
    redis.flushdb()
    up = shoal(options, "up", "--services", "none", "--node", "shop", "--crawlers", "1", "--spider", "shop")
    assert up.returncode == 0, up.stdout + up.stderr
    try:
        wait_until(lambda: set(COMPONENTS) <= running(options), 90, 0.5, "the node never ran")
        items = TopicReader(services.broker.address, f"{prefix}.items")
        dead = TopicReader(services.broker.address, f"{prefix}.dead_letter")
        with SiteServer(site):
            request = {"url": catalogue.seed_url, "appid": "shop", "crawlid": "catalogue", "spiderid": "shop",
                       "maxdepth": 20}  # fmt: skip
            fed = shoal(options, "feed", json.dumps(request))
            assert fed.returncode == 0, fed.stderr
            progress_key = keys.crawl_progress("shop", "shop", "catalogue")

            def finished() -> bool:
                counts = redis.hgetall(progress_key)
                return int(counts.get("enqueued", 0)) > 0 and not any(
                    int(float(counts.get(k, 0))) for k in ("queued", "inflight", "retrying")
                )

            wait_until(finished, 120, 0.5, "the crawl did not finish")
            items.wait_for(lambda got: len(got) >= len(catalogue.valid()), timeout=30, message="items missing")
            dead.wait_for(lambda got: len(got) >= 1, timeout=30, message="no dead letter")
            items.poll(2.0)  # anything extra would arrive now
            dead.poll(0.5)
        counts = {k: int(float(v)) for k, v in redis.hgetall(progress_key).items()
                  if k not in {"spiderid", "appid", "crawlid"}}
        letters = [json.loads(x) for x in redis.lrange(keys.dead_letters("shop", "shop", "catalogue"), 0, -1)]
    finally:
        down = shoal(options, "down", "--node", "shop")
        redis.flushdb()
    messages = items.messages
    items.close()
    dead.close()
    by_sku = Counter(m["item"]["sku"] for m in messages)
    assert max(by_sku.values()) == 1  # each product once, though some are listed on two pages
    expected = {p.sku: p for p in catalogue.valid()}
    assert set(by_sku) == set(expected)  # every valid product; none missing a field, not the buggy one
    for message in messages:
        product = expected[message["item"]["sku"]]
        assert message["item"] == {"sku": product.sku, "name": product.name, "price": product.price,
                                   "currency": product.currency, "available": product.available,
                                   "url": catalogue.url(product.path)}  # fmt: skip
        assert (message["appid"], message["crawlid"], message["spiderid"]) == ("shop", "catalogue", "shop")
        assert message["url"] == catalogue.url(product.path)
        assert message["item_type"] == "Product"
        assert message["request_id"]
    buggy = [catalogue.url(p.path) for p in catalogue.products if p.comma_price]
    assert [d["url"] for d in dead.messages] == buggy
    assert dead.messages[0]["error"].startswith("ValueError: could not convert string to float")
    assert [d["url"] for d in letters] == buggy
    pages = catalogue.listing_pages + len(catalogue.products)
    assert counts["crawled"] + counts.get("failed", 0) + counts.get("dead", 0) == pages
    assert counts["crawled"] == pages - len(buggy)
    assert down.returncode == 0, down.stdout + down.stderr
