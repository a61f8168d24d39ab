"""Vanished items (issue 33): a user spider's page that yields no items where the pages of the same
callback on its domain usually do is a block detection, counted on the domain's ladder.

Opt-in (BLOCK_ITEMS_VANISHED), for users' spiders only (ShoalSpider subclasses). Pages are compared
per domain and callback, so a listing page (links, no items) never sets what a product page should
yield. An item counts when its spider's `item_key` field is filled (any item when the spider names
none): a challenge or shell page parsed into a blank record has vanished items too. The page itself
is kept (its items, if any, were yielded already); the detection steps the domain's ladder.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable
from typing import Any

from itemadapter import ItemAdapter, is_item
from scrapy import Request
from scrapy.crawler import Crawler
from scrapy.exceptions import NotConfigured
from scrapy.http import Response

from crawler.blocks import MEAN_WEIGHT, Detection
from crawler.ladder import ladder_of
from crawler.meta import LEASE, ShoalMessage
from crawler.spider_output import _users_spiders_only
from utils.config.settings import Settings

USUAL = 0.5  # mean items per page of a callback above which a page without any is a vanishing


class ItemsVanishedMiddleware:
    def __init__(self, crawler: Crawler, min_samples: int) -> None:
        self.crawler, self.min_samples = crawler, min_samples
        self.usual: dict[tuple[str, str], tuple[int, float]] = {}  # (domain, callback) -> (pages, mean items)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> ItemsVanishedMiddleware:
        settings: Settings = crawler.settings["SHOAL"]
        if not settings.get_bool("BLOCK_ITEMS_VANISHED"):
            raise NotConfigured("BLOCK_ITEMS_VANISHED is off")
        _users_spiders_only(crawler)
        return cls(crawler, settings.get_int("BLOCK_MIN_SAMPLES"))

    def process_spider_output(self, response: Response, result: Iterable[Any]) -> Iterable[Any]:
        items = 0
        for entry in result:
            items += self.is_record(entry)
            yield entry
        self.page_done(response, items)

    async def process_spider_output_async(
        self, response: Response, result: AsyncIterator[Any]
    ) -> AsyncIterator[Any]:
        items = 0
        async for entry in result:
            items += self.is_record(entry)
            yield entry
        self.page_done(response, items)

    def is_record(self, entry: Any) -> bool:
        if entry is None or isinstance(entry, Request | ShoalMessage) or not is_item(entry):
            return False
        key = getattr(self.crawler.spider, "item_key", None)
        return not key or bool(ItemAdapter(entry).get(key))

    def page_done(self, response: Response, items: int) -> None:
        """Compare the page with its callback's usual yield; a vanishing counts on the ladder."""
        lease = response.meta.get(LEASE)
        if lease is None or response.status != 200:
            return  # a status is the status sign's (crawler/blocks.py)
        found = self.judge(lease.domain, _callback_name(response), items)
        ladder, spider = ladder_of(self.crawler), self.crawler.spider
        if found is not None and ladder is not None and spider is not None:
            ladder.count_block(spider, lease.domain, response.meta, response.url, found)

    def judge(self, domain: str, callback: str, items: int) -> Detection | None:
        pages, mean = self.usual.get((domain, callback), (0, 0.0))
        if items == 0 and pages >= self.min_samples and mean >= USUAL:
            return Detection("items_vanished", f"no items from {callback}, usually {mean:.1f}")
        weight = 1.0 if pages == 0 else max(MEAN_WEIGHT, 1.0 / (pages + 1))
        self.usual[(domain, callback)] = (pages + 1, mean + (items - mean) * weight)
        return None


def _callback_name(response: Response) -> str:
    callback = response.request.callback if response.request is not None else None
    return getattr(callback, "__name__", None) or "parse"
