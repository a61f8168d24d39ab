"""A user spider module for the tests, found through SPIDER_MODULES=tests.e2e.user_spider_module.

It sends its raw pages too (`send_pages`), yields plain dict items, and its `parse` raises before
yielding anything on one page (a callback that is not a generator), the other path of a user bug.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from scrapy.http import Response

from crawler.spiders import ShoalSpider

FAILING_PATH = "/shop/page/3.html"


class PagesAndItemsSpider(ShoalSpider):
    name = "pages_and_items"
    send_pages = True

    def parse(self, response: Response, **_: Any) -> Iterator[Any]:
        if response.url.endswith(FAILING_PATH):
            raise RuntimeError(f"no parser for {FAILING_PATH}")
        return self._listing(response)

    def _listing(self, response: Response) -> Iterator[Any]:
        yield {"listing": response.url, "cards": len(response.css("a.product"))}
        next_page = response.css("a.next::attr(href)").get()
        if next_page:
            yield response.follow(next_page, callback=self.parse)
