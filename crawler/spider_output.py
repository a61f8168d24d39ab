"""Spider middlewares for users' spiders (ShoalSpider subclasses); not loaded for the built-in ones.

`FollowPolicyMiddleware` (next to the spider) gives each yielded request its depth and priority
and applies the crawl's filters, as the link spider does for its links. `ItemLedgerMiddleware`
(outermost) counts each page's items in the ledger, ends the page's output with the message that
settles its lease, and turns an exception of user code into a dead letter for that page only.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Iterable
from typing import Any

from scrapy import Request
from scrapy.crawler import Crawler
from scrapy.exceptions import NotConfigured
from scrapy.http import Response
from scrapy.utils.url import url_has_any_extension, url_is_from_any_domain

from crawler.items import ItemLedger, ledger_of
from crawler.meta import LEASE, ShoalMessage
from crawler.spiders.shoal import ShoalSpider
from utils.config.errors import last_line
from utils.config.safe_regex import InvalidRegex, pattern_set

log = logging.getLogger(__name__)

_WRAPPED = "shoal_output_wrapped"  # response meta: the ledger wrapper runs for this page
_FILTERS: dict[tuple[Any, ...], tuple[Any, ...]] = {}  # compiled filters per crawl's filter fields


class FollowPolicyMiddleware:
    """Depth (`curdepth` + 1, dropped beyond `maxdepth`), priority (parent's - 10 + the request's own
    `priority`) and the crawl's allowed_domains/allow_regex/deny_regex/deny_extensions."""

    def __init__(self, crawler: Crawler) -> None:
        self.crawler = crawler

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> FollowPolicyMiddleware:
        _users_spiders_only(crawler)
        return cls(crawler)

    def process_spider_output(self, response: Response, result: Iterable[Any]) -> Iterable[Any]:
        for entry in result:
            if not isinstance(entry, Request) or self._follows(response.meta, entry):
                yield entry

    async def process_spider_output_async(
        self, response: Response, result: AsyncIterator[Any]
    ) -> AsyncIterator[Any]:
        async for entry in result:
            if not isinstance(entry, Request) or self._follows(response.meta, entry):
                yield entry

    def _follows(self, parent: dict[str, Any], request: Request) -> bool:
        meta = request.meta
        if "curdepth" not in meta:
            meta["curdepth"] = int(parent.get("curdepth", 0)) + 1
            if meta["curdepth"] > int(parent.get("maxdepth", 0)):
                self._drop("maxdepth")
                return False
        if "priority" not in meta:
            meta["priority"] = int(parent.get("priority", 1)) - 10 + request.priority
        if not crawl_filters_allow(parent, request.url):
            self._drop("filtered")
            return False
        return True

    def _drop(self, reason: str) -> None:
        if self.crawler.stats is not None:
            self.crawler.stats.inc_value(f"shoal/requests_dropped/{reason}")


def _users_spiders_only(crawler: Crawler) -> None:
    """Not loaded at all for the built-in spiders: their per-page path stays as it was."""
    if crawler.spidercls is None or not issubclass(crawler.spidercls, ShoalSpider):
        raise NotConfigured("only for ShoalSpider subclasses")


def crawl_filters_allow(meta: dict[str, Any], url: str) -> bool:
    """The crawl request's link filters, with the link spider's meaning (deny wins; subdomains allowed).

    The regex lists run as RE2 sets, as in the link spider; a list RE2 refuses lets no request through.
    """
    key = tuple(
        tuple(meta[name]) if meta.get(name) else None
        for name in ("allowed_domains", "allow_regex", "deny_regex", "deny_extensions")
    )
    if key == (None, None, None, None):
        return True
    compiled = _FILTERS.get(key)
    if compiled is None:
        compiled = _compile_filters(key)
        if len(_FILTERS) > 1024:
            _FILTERS.clear()
        _FILTERS[key] = compiled
    if compiled is _REFUSED:
        return False
    domains, allow, deny, extensions = compiled
    if domains and not url_is_from_any_domain(url, domains):
        return False
    if allow is not None and not allow.search(url):
        return False
    if deny is not None and deny.search(url):
        return False
    return not (extensions and url_has_any_extension(url, extensions))


_REFUSED: tuple[Any, ...] = ()  # the compiled filters of a crawl whose regexes RE2 refuses


def _compile_filters(key: tuple[Any, ...]) -> tuple[Any, ...]:
    domains, allow, deny, extensions = key
    try:
        allow_set, deny_set = (pattern_set(p) if p else None for p in (allow, deny))
    except InvalidRegex as exc:
        log.error("Invalid regex in crawl request; no requests followed", extra={"error": str(exc)})
        return _REFUSED
    return domains, allow_set, deny_set, ["." + e.lower().lstrip(".") for e in extensions or ()]


class ItemLedgerMiddleware:
    def __init__(self, crawler: Crawler) -> None:
        self.crawler = crawler
        self.ledger: ItemLedger = ledger_of(crawler)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> ItemLedgerMiddleware:
        _users_spiders_only(crawler)
        return cls(crawler)

    def process_spider_output(self, response: Response, result: Iterable[Any]) -> Iterable[Any]:
        spider = self.crawler.spider
        lease = response.meta.get(LEASE)
        if lease is None or not isinstance(spider, ShoalSpider):  # not from the frontier
            yield from result
            return
        response.meta[_WRAPPED] = True
        links: list[str] = []
        for entry in result:
            self._count(entry, lease.member, links)
            yield entry
        yield spider.end_of_page(response, links)

    async def process_spider_output_async(
        self, response: Response, result: AsyncIterator[Any]
    ) -> AsyncIterator[Any]:
        spider = self.crawler.spider
        lease = response.meta.get(LEASE)
        if lease is None or not isinstance(spider, ShoalSpider):
            async for entry in result:
                yield entry
            return
        response.meta[_WRAPPED] = True
        links: list[str] = []
        async for entry in result:
            self._count(entry, lease.member, links)
            yield entry
        yield spider.end_of_page(response, links)

    def process_spider_exception(self, response: Response, exception: Exception) -> Any:
        """User code raised: the page is dead-lettered with the traceback's last line once its items
        (those yielded before the error) are in; the spider goes on."""
        spider = self.crawler.spider
        lease = response.meta.get(LEASE)
        if lease is None or not isinstance(spider, ShoalSpider):
            return None
        error = last_line(exception)
        self.ledger.fail(lease.member, error)
        if self.crawler.stats is not None:
            self.crawler.stats.inc_value(f"shoal/spider_exceptions/{type(exception).__name__}")
        log.error("Spider code failed; the request is dead-lettered", exc_info=exception,
                  extra={"url": response.url, "error": error, "spiderid": spider.name,
                         "crawlid": response.meta.get("crawlid"), "appid": response.meta.get("appid")})  # fmt: skip
        if response.meta.get(_WRAPPED):
            return []  # the wrapper still ends the page's output
        return [spider.end_of_page(response, [])]  # the callback raised before yielding anything

    def _count(self, entry: Any, member: str, links: list[str]) -> None:
        if isinstance(entry, Request):
            links.append(entry.url)
        elif entry is not None and type(entry) is not ShoalMessage:
            self.ledger.expect(member)
