"""Crawls through the whole cluster into PostgreSQL. The link spider's pages: every page lands once, with
its crawl-log line, and crawling the unchanged site again changes no page's content. The example shop
spider's items: every valid product lands once under its `sku` (the spider's `item_key`), and a
re-crawl after one product's price changed updates exactly that row."""

from __future__ import annotations

import dataclasses

import pytest

from tests.support.cluster import TestCluster
from tests.support.kafka import produce
from tests.support.postgres import Postgres
from tests.support.services import wait_until
from tests.support.sink import count, rows, sink_settings, wait_count
from utils.demosite import SiteServer, generate_catalogue, generate_site
from utils.demosite.catalogue import Catalogue, Product
from utils.demosite.generator import Site
from utils.services import free_port

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]

CONTENT = ("status_code", "content_hash", "headers", "links", "body", "first_seen", "last_changed")


@pytest.fixture
def site_server():
    site = generate_site(hosts=2, pages_per_host=80, seed=19, base_ip_octet=19, port=free_port())
    with SiteServer(site) as server:
        yield site, server


def _crawl(cluster: TestCluster, seeds: list[str], crawlid: str) -> None:
    requests = [{"url": seed, "appid": "sinkapp", "crawlid": crawlid, "maxdepth": 10, "deny_extensions": []}
                for seed in seeds]  # fmt: skip
    produce(cluster.settings.get_list("KAFKA_HOSTS")[0], cluster.settings.incoming_topic, requests)


@pytest.mark.parametrize("cluster", [{"QUEUE_HITS": 1000, "QUEUE_WINDOW": 1, "QUEUE_MODERATED": False}], indirect=True)
def test_every_page_of_a_crawl_lands_once_and_a_recrawl_changes_nothing(
    cluster: TestCluster, postgres: Postgres, pg_schema: str, site_server
) -> None:
    site, _server = site_server
    seeds = site.seed_urls()
    expected = site.reachable(seeds, 10, obey_robots=True)
    sink_settings(cluster, postgres, pg_schema)
    cluster.start("kafka-monitor")
    cluster.start("crawl", "--spider", "link")
    cluster.start("sink")
    cluster.start("sink")  # two sinks in one group share the partitions

    _crawl(cluster, seeds, "first")
    wait_count(postgres, pg_schema, "pages", len(expected), timeout=180)
    wait_count(postgres, pg_schema, "crawl_log", len(expected))
    first = {row["url"]: row for row in rows(postgres, pg_schema, "pages", "url")}
    assert set(first) == set(expected)
    for url, row in first.items():
        source = site.pages[url]
        assert row["status_code"] == source.status
        if not source.content_type.startswith(("text/", "application/xml")):
            continue
        assert row["body"] == source.body.decode("utf-8"), url
    log = rows(postgres, pg_schema, "crawl_log", "id")
    assert {row["url"] for row in log} == set(expected)
    assert all(row["worker"] and row["request_id"] and row["crawlid"] == "first" for row in log)

    _crawl(cluster, seeds, "second")
    wait_until(lambda: count(postgres, pg_schema, "pages", "crawlid = 'second'") == len(expected), 180)
    wait_count(postgres, pg_schema, "crawl_log", 2 * len(expected))
    second = {row["url"]: row for row in rows(postgres, pg_schema, "pages", "url")}
    assert set(second) == set(expected)
    for url in expected:
        assert {k: second[url][k] for k in CONTENT} == {k: first[url][k] for k in CONTENT}, url
        assert second[url]["fetched_at"] > first[url]["fetched_at"]


def _priced(site: Site, catalogue: Catalogue, product: Product, price: float) -> Site:
    """The same site with one product page showing another price."""
    url = catalogue.url(product.path)
    page = site.pages[url]
    body = page.body.replace(f">{product.price:.2f}<".encode(), f">{price:.2f}<".encode())
    assert body != page.body
    return dataclasses.replace(site, pages={**site.pages, url: dataclasses.replace(page, body=body)})


def _crawl_shop(cluster: TestCluster, catalogue: Catalogue, crawlid: str) -> None:
    request = {"url": catalogue.seed_url, "appid": "shopapp", "crawlid": crawlid, "spiderid": "shop", "maxdepth": 20}
    produce(cluster.settings.get_list("KAFKA_HOSTS")[0], cluster.settings.incoming_topic, [request])


ITEM_CONTENT = ("item", "content_hash", "first_seen", "last_changed")


@pytest.mark.parametrize("cluster", [{"QUEUE_HITS": 1000, "QUEUE_WINDOW": 1, "QUEUE_MODERATED": False}], indirect=True)
def test_a_user_spiders_items_land_once_by_its_key_and_a_changed_product_updates_only_its_row(
    cluster: TestCluster, postgres: Postgres, pg_schema: str
) -> None:
    site, catalogue = generate_catalogue(f"127.19.1.1:{free_port()}", products=60, per_page=12, seed=23)
    valid = {p.sku: p for p in catalogue.valid()}
    sink_settings(cluster, postgres, pg_schema)
    cluster.start("kafka-monitor")
    cluster.start("crawl", "--spider", "shop")
    cluster.start("sink")

    with SiteServer(site):
        _crawl_shop(cluster, catalogue, "first")
        wait_count(postgres, pg_schema, "items", len(valid), timeout=180)
    first = {row["item_key"]: row for row in rows(postgres, pg_schema, "items", "item_key")}
    assert set(first) == set(valid)  # one row per product, though some are listed on two pages
    for sku, row in first.items():
        product = valid[sku]
        assert row["item"] == {"sku": sku, "name": product.name, "price": product.price, "currency": product.currency,
                               "available": product.available, "url": catalogue.url(product.path)}  # fmt: skip
        assert (row["appid"], row["spiderid"], row["item_type"]) == ("shopapp", "shop", "Product")
        assert row["first_seen"] == row["last_seen"] == row["last_changed"]

    changed = sorted(valid.values(), key=lambda p: p.sku)[0]
    with SiteServer(_priced(site, catalogue, changed, changed.price + 1)):
        _crawl_shop(cluster, catalogue, "second")
        wait_until(lambda: count(postgres, pg_schema, "items", "crawlid = 'second'") == len(valid), 180)
    second = {row["item_key"]: row for row in rows(postgres, pg_schema, "items", "item_key")}
    assert set(second) == set(valid)
    for sku, row in second.items():
        assert row["last_seen"] > first[sku]["last_seen"], sku
        if sku == changed.sku:
            assert row["item"]["price"] == changed.price + 1
            assert row["content_hash"] != first[sku]["content_hash"]
            assert row["last_changed"] == row["last_seen"]
            assert row["first_seen"] == first[sku]["first_seen"]
        else:
            assert {k: row[k] for k in ITEM_CONTENT} == {k: first[sku][k] for k in ITEM_CONTENT}, sku
