"""The `link` spider: every page to Kafka, its links followed up to `maxdepth`."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

from scrapy import Request
from scrapy.http import Response, TextResponse
from scrapy.link import Link
from scrapy.linkextractors import IGNORED_EXTENSIONS, LinkExtractor

from crawler.spiders.base import RedisSpider
from utils.observability.metrics import record_dropped

log = logging.getLogger(__name__)

_EXTRACTORS: dict[tuple[Any, ...], LinkExtractor] = {}  # one compiled extractor per crawl's filters


def link_extractor(meta: dict[str, Any]) -> LinkExtractor:
    """Scrapy Cluster's extractor: allowed_domains match subdomains, deny wins over allow."""
    filters = tuple(
        tuple(meta.get(name) or ()) if meta.get(name) is not None else None
        for name in ("allow_regex", "deny_regex", "allowed_domains", "deny_extensions")
    )
    extractor = _EXTRACTORS.get(filters)
    if extractor is None:
        allow, deny, domains, extensions = filters
        extractor = LinkExtractor(
            allow=allow or (),
            deny=deny or (),
            allow_domains=domains or (),
            deny_extensions=IGNORED_EXTENSIONS if extensions is None else list(extensions),
        )
        if len(_EXTRACTORS) > 1024:
            _EXTRACTORS.clear()
        _EXTRACTORS[filters] = extractor
    return extractor


def page_links(response: Response, limit: int = 0) -> list[Link]:
    """The links a page's crawl follows (none from non-text responses), at most `limit` (0 = all);
    links past the limit are counted under `links_capped` (a page of a million links must not
    become a million requests)."""
    if not isinstance(response, TextResponse):
        return []
    links = link_extractor(response.meta).extract_links(response)
    if limit and len(links) > limit:
        record_dropped(str(response.meta.get("spiderid") or ""), "links_capped", len(links) - limit)
        log.warning("Links capped", extra={"url": response.url[:200], "links": len(links), "kept": limit})
        del links[limit:]
    return links


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
