"""The base of every Shoal spider: fed by Redis only, never idle-closed, failures become pages."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from scrapy import Spider, signals
from scrapy.crawler import Crawler
from scrapy.exceptions import DontCloseSpider
from scrapy.http import Response
from twisted.python.failure import Failure

from crawler.meta import DETAILS, EXTRACTED, LEASE, OUTCOME, SILENT, ShoalMessage
from crawler.page import failure_message, page_message
from crawler.retry import Blocked, RetryPolicy
from crawler.revisit import revisit_fields
from utils.frontier import dead_letters
from utils.frontier.revisit_policy import RevisitPolicy


@dataclass(frozen=True)
class LinkBounds:
    """How much of one page its links cost: distinct links kept, bytes parsed, seconds spent parsing (0 = none)."""

    links: int = 0
    parse_bytes: int = 0
    parse_seconds: float = 0.0


class RedisSpider(Spider):
    """No start URLs: every request comes from the frontier."""

    retry_policy: RetryPolicy

    @classmethod
    def from_crawler(cls, crawler: Crawler, *args: Any, **kwargs: Any) -> RedisSpider:
        spider = super().from_crawler(crawler, *args, **kwargs)
        crawler.signals.connect(spider.on_idle, signal=signals.spider_idle)
        spider.retry_policy = RetryPolicy.from_settings(
            crawler.settings["SHOAL"], crawler.settings.getlist("RETRY_EXCEPTIONS")
        )
        return spider

    async def start(self) -> Any:  # noqa: D102 - Scrapy >= 2.13 start(): nothing to start with
        return
        yield  # pragma: no cover

    def on_idle(self) -> None:
        raise DontCloseSpider

    @cached_property
    def base64_bodies(self) -> bool:
        """KAFKA_BASE_64_ENCODE, read once instead of once a page."""
        return bool(self.settings["SHOAL"].get_bool("KAFKA_BASE_64_ENCODE"))

    @cached_property
    def links_max(self) -> int:
        """LINKS_PER_PAGE_MAX: most links one page adds to the frontier."""
        return int(self.settings["SHOAL"].get_int("LINKS_PER_PAGE_MAX"))

    @cached_property
    def link_bounds(self) -> LinkBounds:
        """LINKS_PER_PAGE_MAX, LINKS_PARSE_BYTES_MAX and LINKS_PARSE_SECONDS_MAX, read once."""
        settings = self.settings["SHOAL"]
        return LinkBounds(self.links_max, settings.get_int("LINKS_PARSE_BYTES_MAX"),
                          settings.get_float("LINKS_PARSE_SECONDS_MAX"))  # fmt: skip

    def page(self, response: Response) -> ShoalMessage:
        item = page_message(response, self.base64_bodies)
        item[LEASE] = response.meta.get(LEASE)
        extracted = response.meta.get(EXTRACTED)
        if extracted:
            item.update(extracted)
        item.update(revisit_fields(response, item["url"], self.revisit_base, getattr(self, "revisit_policy", None),
                                   getattr(self, "domain_config", None)))  # fmt: skip
        if item.get("not_modified"):
            item.pop("body_encoding", None)
        return item

    @cached_property
    def revisit_base(self) -> RevisitPolicy:
        """The REVISIT_* settings, read once (issue 31)."""
        return RevisitPolicy.from_settings(self.settings["SHOAL"])

    def errback(self, failure: Failure) -> Iterator[ShoalMessage]:
        """A failed try: retried through Redis, dead-lettered with a `success: false` page, or dropped."""
        request = failure.request  # type: ignore[attr-defined]
        lease = request.meta.get(LEASE)
        attempt = int(request.meta.get("attempt", 0))
        blocks = int(lease.record.get("blocks", 0)) if lease is not None else 0
        decision = self.retry_policy.decide(failure, attempt, blocks)
        if decision.outcome in ("retry", "dropped_robots", "dropped_address"):
            details = {}
            if decision.outcome == "retry" and lease is not None:
                record = self.retry_policy.next_record(lease.record, isinstance(failure.value, Blocked))
                details = {"record": record, "delay": decision.delay, "pause": decision.pause}
            yield ShoalMessage({LEASE: lease, SILENT: True, OUTCOME: decision.outcome, DETAILS: details,
                                "url": request.url})  # fmt: skip
            return
        item = failure_message(request, decision.error, decision.status)
        item[LEASE] = lease
        item[OUTCOME] = decision.outcome
        if decision.outcome == "dead" and lease is not None:
            record = dead_letters.record(lease.record, decision.error, decision.status, attempt + blocks + 1,
                                         "crawler")  # fmt: skip
            item[DETAILS] = {"dead_letter": record}
        yield item
