"""Spiders of bench/follow_up_latency.py, found through SPIDER_MODULES=bench.follow_up_spiders.

Each request a page yields carries the time it was yielded (`cb_kwargs`, which the frontier
stores); `request_reached_downloader` stamps the time its fetch starts into its meta; the
callback yields both as an item, so the bench reads every hop's latency off the items topic.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any, ClassVar

from scrapy import Request, signals
from scrapy.crawler import Crawler
from scrapy.http import Response

from crawler.spiders import ShoalSpider

REACHED = "bench_reached_at"


class ChainSpider(ShoalSpider):
    """Follows "next page" links only: one hop at a time, the crawler idle in between."""

    name = "hops"
    follow_books: ClassVar[bool] = False

    @classmethod
    def from_crawler(cls, crawler: Crawler, *args: Any, **kwargs: Any) -> ChainSpider:
        spider = super().from_crawler(crawler, *args, **kwargs)
        crawler.signals.connect(_reached, signal=signals.request_reached_downloader)
        return spider

    def parse(self, response: Response, yielded_at: float = 0.0, **_: Any) -> Iterator[Any]:
        yield _hop(response, "listing", yielded_at)
        for href in response.css("a.shelf::attr(href)").getall():
            yield _follow(response, href, self.parse)
        if self.follow_books:
            for href in response.css("a.product::attr(href)").getall():
                yield _follow(response, href, self.parse_book)
        next_page = response.css("a.next::attr(href)").get()
        if next_page:
            yield _follow(response, next_page, self.parse)

    def parse_book(self, response: Response, yielded_at: float = 0.0) -> Iterator[Any]:
        yield _hop(response, "book", yielded_at)


class BusySpider(ChainSpider):
    """Follows the books too: every download slot busy while the shelves' chains advance."""

    name = "hops_busy"
    follow_books = True


def _follow(response: Response, href: str, callback: Any) -> Request:
    return response.follow(href, callback=callback, cb_kwargs={"yielded_at": time.time()})


def _hop(response: Response, kind: str, yielded_at: float) -> dict[str, Any]:
    reached = response.meta.get(REACHED, 0.0)
    latency = 1000 * (reached - yielded_at) if yielded_at and reached else None
    return {"url": response.url, "kind": kind, "latency_ms": latency}


def _reached(request: Request, **_: Any) -> None:
    request.meta.setdefault(REACHED, time.time())
