"""Drops product records that miss a required field, and counts them (Scrapy stats `shop/invalid`)."""

from __future__ import annotations

from typing import Any

from scrapy.crawler import Crawler
from scrapy.exceptions import DropItem

from shoal_shop.items import Product


class ValidateProduct:
    def __init__(self, crawler: Crawler) -> None:
        self.stats = crawler.stats

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> ValidateProduct:
        return cls(crawler)

    def process_item(self, item: Any) -> Any:
        if isinstance(item, Product):
            missing = [name for name in Product.REQUIRED if getattr(item, name) is None]
            if missing:
                if self.stats is not None:
                    self.stats.inc_value("shop/invalid")
                raise DropItem(f"product {item.sku} misses {', '.join(missing)}")
            if self.stats is not None:
                self.stats.inc_value("shop/valid")
        return item
