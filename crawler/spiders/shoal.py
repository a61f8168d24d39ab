"""`ShoalSpider`: the base class of users' spiders (docs/how-to/own-spider.md).

A subclass sets `name` and writes callbacks as in plain Scrapy: they yield `scrapy.Request`s
(queued through the frontier: dupefilter, throttle, leases, `maxdepth` and the crawl's filters,
priority) and items (dicts, dataclasses, attrs objects, `scrapy.Item`). `response.meta` holds the
crawl request's fields: `appid`, `crawlid`, `attrs`, `curdepth`, ... Items go to `<prefix>.items`;
set `send_pages = True` to also send each page's raw message to `<prefix>.crawled_firehose`.
An exception in a callback dead-letters that request only; the spider goes on.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, ClassVar

from scrapy.http import Response

from crawler.meta import DETAILS, LEASE, OUTCOME, SILENT, ShoalMessage
from crawler.spiders.base import RedisSpider


class ShoalSpider(RedisSpider):
    send_pages: ClassVar[bool] = False  # also send the raw page message of every page parsed
    item_key: ClassVar[str | None] = None  # the item field naming a record (sent as `item_key`; the sink's key)

    def parse(self, response: Response, **kwargs: Any) -> Iterable[Any]:
        raise NotImplementedError(f"{type(self).__name__}.parse is not defined")

    def end_of_page(self, response: Response, links: list[str]) -> ShoalMessage:
        """What settles the page's lease once its items are in: its page message, or a silent outcome."""
        if self.send_pages:
            message = self.page(response)
            message["links"] = [{"url": url, "text": ""} for url in links]
            return message
        return ShoalMessage({LEASE: response.meta.get(LEASE), SILENT: True, OUTCOME: "crawled", DETAILS: {},
                             "url": response.url})  # fmt: skip
