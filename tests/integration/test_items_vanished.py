"""Vanished items (issue 33): the example `shop` spider (examples/shop) parses real pages of the demo
catalogue; when its product pages start answering a challenge shell (200, no product), the pages
that yield no record count as block detections on the domain's ladder in a real Redis, and step it
up, while listing pages (links, never items) are judged apart and never count."""

from __future__ import annotations

import urllib.request
from typing import Any

import pytest
import redis
from scrapy import Request
from scrapy.http import HtmlResponse
from scrapy.utils.test import get_crawler
from shoal_shop.items import Product
from shoal_shop.spiders import ShopSpider

from crawler.addon import COMPONENTS
from crawler.blocks import BlockDetector
from crawler.items_vanished import ItemsVanishedMiddleware
from crawler.ladder import LadderMiddleware
from crawler.meta import LEASE
from utils.config.settings import Settings
from utils.demosite import SiteServer, generate_catalogue
from utils.frontier import Lease
from utils.frontier.domain_config import DomainConfig
from utils.frontier.ladder import Ladder
from utils.services import free_port

pytestmark = pytest.mark.integration
HOST = "127.33.0.7"
SHELL = b"<html><body><div class='challenge'>Checking your browser...</div></body></html>"


def test_a_shop_whose_product_pages_stop_yielding_products_steps_its_ladder(redis_db: redis.Redis) -> None:
    assert "crawler.items_vanished.ItemsVanishedMiddleware" in COMPONENTS["SPIDER_MIDDLEWARES"]
    settings = Settings.load(environ={}, overrides={"BLOCK_ITEMS_VANISHED": "true", "LADDER_UP_AFTER": "2"})
    crawler = get_crawler(ShopSpider, settings_dict={"SHOAL": settings})
    spider = crawler.spider = ShopSpider.from_crawler(crawler)
    config = DomainConfig.parse("")  # nothing set for the domain in ZooKeeper
    spider.domain_config = lambda: config  # type: ignore[method-assign]
    ladder = Ladder(redis_db, 10, 600)
    LadderMiddleware(crawler, settings, ladder, BlockDetector.from_settings(settings))
    vanished = ItemsVanishedMiddleware.from_crawler(crawler)
    site, catalogue = generate_catalogue(f"{HOST}:{free_port()}", products=12, per_page=6, comma_prices=0)
    shelled = [p.path for p in catalogue.products[8:10]]

    def crawl(url: str, callback: Any) -> list[Any]:
        with urllib.request.urlopen(url, timeout=10) as answer:  # noqa: S310 (a loopback demo site)
            body = answer.read()
        record = {"appid": "a", "crawlid": "c", "url": url, "spiderid": "shop"}
        request = Request(url, callback=callback, meta={LEASE: Lease("shop", HOST, "0" * 16, record)})
        response = HtmlResponse(url, body=body, request=request)
        return list(vanished.process_spider_output(response, callback(response)))

    with SiteServer(site, extra_routes={path: (200, "text/html", SHELL) for path in shelled}):
        listing = crawl(catalogue.seed_url, spider.parse)
        assert listing
        assert not any(isinstance(x, Product) for x in listing)
        for product in catalogue.products[:8]:  # BLOCK_MIN_SAMPLES (5) and more: one product each
            assert len(crawl(catalogue.url(product.path), spider.parse_product)) == 1
        assert ladder.state("shop", HOST)["detections"] == 0  # listing pages yield no items: not a sign
        for path in shelled:
            [blank] = crawl(catalogue.url(path), spider.parse_product)  # a blank Product: no sku
            assert blank.sku == ""
    state = ladder.state("shop", HOST)
    assert state["detections"] == 2
    assert state["level"] == 1  # LADDER_UP_AFTER 2
    assert state["history"][0]["reason"] == "items_vanished"
