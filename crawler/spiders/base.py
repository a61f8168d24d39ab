"""The base of every Shoal spider: fed by Redis only, never idle-closed, failures become pages."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from scrapy import Spider, signals
from scrapy.crawler import Crawler
from scrapy.exceptions import DontCloseSpider, IgnoreRequest
from scrapy.http import Response
from scrapy.spidermiddlewares.httperror import HttpError
from twisted.python.failure import Failure

from crawler.meta import LEASE
from crawler.page import failure_message, page_message

SILENT = "shoal_silent"  # an item that settles a lease without sending a page (e.g. robots.txt)
OUTCOME = "shoal_outcome"


class RedisSpider(Spider):
    """No start URLs: every request comes from the frontier."""

    @classmethod
    def from_crawler(cls, crawler: Crawler, *args: Any, **kwargs: Any) -> RedisSpider:
        spider = super().from_crawler(crawler, *args, **kwargs)
        crawler.signals.connect(spider.on_idle, signal=signals.spider_idle)
        return spider

    async def start(self) -> Any:  # noqa: D102 - Scrapy >= 2.13 start(): nothing to start with
        return
        yield  # pragma: no cover

    def on_idle(self) -> None:
        raise DontCloseSpider

    def page(self, response: Response) -> dict[str, Any]:
        item = page_message(response, self.settings["SHOAL"].get_bool("KAFKA_BASE_64_ENCODE"))
        item[LEASE] = response.meta.get(LEASE)
        return item

    def errback(self, failure: Failure) -> Iterator[dict[str, Any]]:
        """A request that failed for good: a `success: false` page, or a silent drop for robots."""
        request = failure.request  # type: ignore[attr-defined]
        lease = request.meta.get(LEASE)
        if failure.check(IgnoreRequest) and not failure.check(HttpError):
            yield {LEASE: lease, SILENT: True, OUTCOME: "dropped_robots", "url": request.url}
            return
        error = failure.value
        status = error.response.status if isinstance(error, HttpError) else None
        item = failure_message(request, f"{type(error).__name__}: {failure.getErrorMessage()}", status)
        item[LEASE] = lease
        item[OUTCOME] = "failed"
        yield item
