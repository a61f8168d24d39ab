"""The `shop` spider: listing pages (and their pagination), then one Product per product page.

It crawls the demo catalogue (`/shop/`) and the bookshop's shelves (`/books/`, utils/demosite/bookshop.py) alike.

Its price parser is naive on purpose: `float("1.234,50")` raises, and Shoal dead-letters that one
product page while the crawl goes on (the end-to-end test checks it).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, ClassVar

from scrapy.http import Response

from crawler.spiders import ShoalSpider
from shoal_shop.items import Product


class ShopSpider(ShoalSpider):
    name = "shop"
    item_key = "sku"  # a product is one record however many URLs list it
    custom_settings: ClassVar[dict[str, Any]] = {"ITEM_PIPELINES": {"shoal_shop.pipelines.ValidateProduct": 300}}

    def parse(self, response: Response, **_: Any) -> Iterator[Any]:
        """A listing page: every product card, then the next listing page (a bookshop's shelf
        index lists shelves, each a chain of listing pages)."""
        for href in response.css("a.shelf::attr(href)").getall():
            yield response.follow(href, callback=self.parse)
        for href in response.css("a.product::attr(href)").getall():
            yield response.follow(href, callback=self.parse_product)
        next_page = response.css("a.next::attr(href)").get()
        if next_page:
            yield response.follow(next_page, callback=self.parse)

    def parse_product(self, response: Response) -> Iterator[Product]:
        price = response.css("span.price::text").get()
        availability = response.css("p.availability::text").get()
        yield Product(
            sku=response.css("span.sku::text").get() or "",
            name=response.css("h1.name::text").get(),
            price=float(price) if price is not None else None,
            currency=response.css("span.price::attr(data-currency)").get(),
            available=None if availability is None else availability == "in stock",
            url=response.url,
        )
