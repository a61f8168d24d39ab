"""The `link` spider: every page to Kafka, its links followed up to `maxdepth`."""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Iterator
from functools import cached_property
from typing import TYPE_CHECKING, Any

from scrapy import Request
from scrapy.crawler import Crawler
from scrapy.http import Response, TextResponse
from scrapy.link import Link
from scrapy.linkextractors import IGNORED_EXTENSIONS, LinkExtractor
from scrapy.utils.response import get_base_url

from crawler.meta import NO_FOLLOW
from crawler.spiders.base import LinkBounds, RedisSpider
from utils.config.safe_regex import InvalidRegex, PatternSet, pattern_set
from utils.frontier.fingerprint import canonical_url
from utils.observability.metrics import record_dropped

if TYPE_CHECKING:
    from crawler.sitemap_follow import SitemapFollower

log = logging.getLogger(__name__)

_ANCHOR = re.compile(rb"<(?:a|area)[\s>]", re.IGNORECASE)  # what LinkExtractor reads links from
_EXTRACTORS: dict[tuple[Any, ...], LinkExtractor] = {}  # one compiled extractor per crawl's filters
CHUNK = 256 * 1024  # bytes; a page is parsed in pieces this size (cut before an anchor), the clock read between


def link_extractor(meta: dict[str, Any]) -> LinkExtractor:
    """Scrapy Cluster's extractor (allowed_domains match subdomains); the regexes are applied after it."""
    filters = tuple(
        tuple(meta.get(name) or ()) if meta.get(name) is not None else None
        for name in ("allowed_domains", "deny_extensions")
    )
    extractor = _EXTRACTORS.get(filters)
    if extractor is None:
        domains, extensions = filters
        extractor = LinkExtractor(
            allow_domains=domains or (),
            deny_extensions=IGNORED_EXTENSIONS if extensions is None else list(extensions),
        )
        if len(_EXTRACTORS) > 1024:
            _EXTRACTORS.clear()
        _EXTRACTORS[filters] = extractor
    return extractor


def page_links(response: Response, limit: int | LinkBounds = 0) -> list[Link]:
    """The distinct links a page's crawl follows (none from non-text responses), within `limit`.

    Links count after canonicalisation: fragments are dropped and links that differ only so (or in
    query order) are one link, followed once, with the text of its first anchor. A page of the
    Python docs' contents.html kind (~10,000 anchors, mostly fragments of a few hundred pages; issue
    30) keeps every page it links to.
    allow_regex / deny_regex run as one RE2 set each (linear time, one pass per link whatever the
    number of patterns); deny wins over allow, as in Scrapy's LinkExtractor. A list RE2 refuses (the
    kafka monitor refuses such crawls; one could still come from an older queue) follows no link of
    the page: the page itself is sent and its lease settled, never renewed forever.
    A hostile page stays cheap: it is parsed in pieces, never past `parse_bytes` nor `parse_seconds`,
    and no further than the piece where `links` distinct links are reached (a million links parsed
    at once took 1 GB and 144 s); the anchors left out are counted as `links_capped`.
    """
    if not isinstance(response, TextResponse):
        return []
    bounds = limit if isinstance(limit, LinkBounds) else LinkBounds(links=limit)
    try:
        filters = _Filters(response.meta)
    except InvalidRegex as exc:
        log.error("Invalid regex in crawl request; no links followed", extra={"error": str(exc), "url": response.url})
        return []
    return _Collector(response, filters, bounds).run()


class _Filters:
    """A crawl's allow/deny lists as RE2 sets."""

    def __init__(self, meta: dict[str, Any]) -> None:
        allow, deny = meta.get("allow_regex") or (), meta.get("deny_regex") or ()
        self.allow: PatternSet | None = pattern_set(tuple(allow)) if allow else None
        self.deny: PatternSet | None = pattern_set(tuple(deny)) if deny else None

    def allows(self, url: str) -> bool:
        return (self.allow is None or self.allow.search(url)) and (self.deny is None or not self.deny.search(url))


class _Collector:
    """One page's links, piece by piece, merged by canonical URL."""

    def __init__(self, response: TextResponse, filters: _Filters, bounds: LinkBounds) -> None:
        self.response, self.filters, self.bounds = response, filters, bounds
        self.extractor = link_extractor(response.meta)
        self.links: dict[str, Link] = {}  # canonical URL -> the link followed
        self.seen: set[str] = set()  # URLs without fragment already looked at
        self.capped = 0

    def run(self) -> list[Link]:
        body, deadline = self.response.body, self._deadline()
        end = min(len(body), self.bounds.parse_bytes or len(body))
        start = 0
        for start, stop in self._pieces(body, end):
            if self._full() or (deadline and time.monotonic() > deadline):
                break
            self._add(self._extract(start, stop))
        else:
            start = end
        self._count_left_out(body, start, end)
        return list(self.links.values())

    def _deadline(self) -> float:
        return time.monotonic() + self.bounds.parse_seconds if self.bounds.parse_seconds else 0.0

    def _full(self) -> bool:
        return bool(self.bounds.links) and len(self.links) >= self.bounds.links

    def _pieces(self, body: bytes, end: int) -> Iterator[tuple[int, int]]:
        """(start, stop) offsets of pieces of about CHUNK bytes, each cut just before an anchor."""
        if not self._ascii_compatible:
            yield 0, end  # UTF-16 and the like: the pieces' <base> prefix would not read
            return
        start = 0
        while start < end:
            match = _ANCHOR.search(body, start + CHUNK, end) if start + CHUNK < end else None
            stop = match.start() if match else end
            yield start, stop
            start = stop

    @cached_property
    def _ascii_compatible(self) -> bool:
        try:
            return "<a>".encode(self.response.encoding) == b"<a>"
        except (LookupError, UnicodeError):
            return False

    @cached_property
    def _base(self) -> bytes:
        """A <base> tag naming the page's base URL, so that every piece resolves links as the page does."""
        base = get_base_url(self.response).replace("&", "&amp;").replace('"', "&quot;")
        return f'<base href="{base}">'.encode(self.response.encoding, "xmlcharrefreplace")

    def _extract(self, start: int, stop: int) -> list[Link]:
        response = self.response
        if start == 0 and stop >= len(response.body):
            return self.extractor.extract_links(response)
        body = response.body[start:stop] if not self._ascii_compatible else self._base + response.body[start:stop]
        return self.extractor.extract_links(response.replace(body=body, encoding=response.encoding))

    def _add(self, links: list[Link]) -> None:
        for link in links:
            url = link.url.partition("#")[0]
            if url in self.seen:
                continue
            self.seen.add(url)
            key = canonical_url(url)
            if key in self.links or not self.filters.allows(url):
                continue
            if self._full():
                self.capped += 1
                continue
            self.links[key] = Link(url, link.text, nofollow=link.nofollow)

    def _count_left_out(self, body: bytes, start: int, end: int) -> None:
        """Links over the bound, plus anchors never parsed (up to the end of the body)."""
        left = self.capped + sum(1 for _ in _ANCHOR.finditer(body, start))
        if not left:
            return
        response = self.response
        record_dropped(str(response.meta.get("spiderid") or ""), "links_capped", left)
        log.warning("Links capped", extra={"url": response.url[:200], "kept": len(self.links), "left_out": left,
                                           "parsed_bytes": start if start < end else end})  # fmt: skip


class LinkSpider(RedisSpider):
    name = "link"

    sitemaps: SitemapFollower

    @classmethod
    def from_crawler(cls, crawler: Crawler, *args: Any, **kwargs: Any) -> LinkSpider:
        from crawler.sitemap_follow import SitemapFollower  # here: it imports spider_output, which imports the spiders

        spider = super().from_crawler(crawler, *args, **kwargs)
        assert isinstance(spider, LinkSpider)
        spider.sitemaps = SitemapFollower.from_crawler(crawler)  # listens for robots.txt from the start
        return spider

    def parse(self, response: Response, **kwargs: Any) -> Iterator[Any]:
        item = self.page(response)
        meta = response.meta
        if meta.get("sitemaps"):  # a crawl that asked for sitemaps (crawler/sitemap_follow.py)
            yield from self.sitemaps.requests(response, item, kwargs)
        if meta.get("revisit_hint") is not None:
            item["revisit_hint"] = meta["revisit_hint"]
        curdepth = int(meta.get("curdepth", 0))
        if curdepth < int(meta.get("maxdepth", 0)) and not meta.get(NO_FOLLOW):
            priority = int(meta.get("priority", 1)) - 10
            for link in page_links(response, self.link_bounds):
                item["links"].append({"url": link.url, "text": link.text.strip()})
                yield Request(link.url, callback=self.parse, meta={"curdepth": curdepth + 1, "priority": priority})
        yield item
