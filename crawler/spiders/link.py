"""The `link` spider: every page to Kafka, its links followed up to `maxdepth`."""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator
from typing import Any

from scrapy import Request
from scrapy.http import Response, TextResponse
from scrapy.link import Link
from scrapy.linkextractors import IGNORED_EXTENSIONS, LinkExtractor

from crawler.spiders.base import RedisSpider
from utils.config.safe_regex import InvalidRegex, any_search, check_regexes
from utils.observability.metrics import record_dropped

log = logging.getLogger(__name__)

_ANCHOR = re.compile(rb"<(?:a|area)[\s>]", re.IGNORECASE)  # what LinkExtractor reads links from
_EXTRACTORS: dict[tuple[Any, ...], LinkExtractor] = {}  # one compiled extractor per crawl's filters


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


def page_links(response: Response, limit: int = 0) -> list[Link]:
    """The links a page's crawl follows (none from non-text responses), at most `limit` (0 = all).

    allow_regex / deny_regex run on RE2 (linear time: a hostile pattern cannot freeze the crawler);
    deny wins over allow, as in Scrapy's LinkExtractor. A pattern RE2 refuses (the kafka monitor
    refuses such crawls; one could still come from an older queue) follows no link of the page: the
    page itself is sent and its lease settled, never renewed forever.
    A page of a million links must not become a million requests, nor a parse tree of a million
    elements (measured: 1 GB and 144 s for 1,000,000 links): past `limit` anchors, only the body up
    to the first anchor beyond it is parsed, and the anchors left out are counted as `links_capped`.
    """
    if not isinstance(response, TextResponse):
        return []
    meta = response.meta
    allow, deny = meta.get("allow_regex") or (), meta.get("deny_regex") or ()
    try:
        check_regexes(allow)
        check_regexes(deny)
    except InvalidRegex as exc:
        log.error("Invalid regex in crawl request; no links followed", extra={"error": str(exc), "url": response.url})
        return []
    if limit:
        cut, extra = _anchor_cut(response.body, limit)
        if extra:
            record_dropped(str(meta.get("spiderid") or ""), "links_capped", extra)
            log.warning("Links capped", extra={"url": response.url[:200], "links": limit + extra, "kept": limit})
            response = response.replace(body=response.body[:cut])
    links = link_extractor(meta).extract_links(response)
    if allow:
        links = [link for link in links if any_search(allow, link.url)]
    if deny:
        links = [link for link in links if not any_search(deny, link.url)]
    return links[: limit or None]


def _anchor_cut(body: bytes, limit: int) -> tuple[int, int]:
    """(offset of the anchor after the first `limit`, anchors from there on); (0, 0) within the limit."""
    cut, extra = 0, 0
    for index, match in enumerate(_ANCHOR.finditer(body)):
        if index == limit:
            cut = match.start()
        if index >= limit:
            extra += 1
    return cut, extra


class LinkSpider(RedisSpider):
    name = "link"

    def parse(self, response: Response, **_: Any) -> Iterator[Any]:
        item = self.page(response)
        meta = response.meta
        curdepth = int(meta.get("curdepth", 0))
        if curdepth < int(meta.get("maxdepth", 0)):
            priority = int(meta.get("priority", 1)) - 10
            for link in page_links(response, self.links_max):
                item["links"].append({"url": link.url, "text": link.text.strip()})
                yield Request(link.url, callback=self.parse, meta={"curdepth": curdepth + 1, "priority": priority})
        yield item
