"""The `link` spider: every page to Kafka, its links followed up to `maxdepth`."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from scrapy import Request
from scrapy.http import Response, TextResponse
from scrapy.linkextractors import IGNORED_EXTENSIONS, LinkExtractor

from crawler.spiders.base import RedisSpider


def link_extractor(meta: dict[str, Any]) -> LinkExtractor:
    """Scrapy Cluster's extractor: allowed_domains match subdomains, deny wins over allow."""
    deny_extensions = meta.get("deny_extensions")
    return LinkExtractor(
        allow=meta.get("allow_regex") or (),
        deny=meta.get("deny_regex") or (),
        allow_domains=meta.get("allowed_domains") or (),
        deny_extensions=IGNORED_EXTENSIONS if deny_extensions is None else deny_extensions,
    )


class LinkSpider(RedisSpider):
    name = "link"

    def parse(self, response: Response, **_: Any) -> Iterator[Any]:
        item = self.page(response)
        meta = response.meta
        curdepth = int(meta.get("curdepth", 0))
        if curdepth < int(meta.get("maxdepth", 0)) and isinstance(response, TextResponse):
            for link in link_extractor(meta).extract_links(response):
                item["links"].append({"url": link.url, "text": link.text.strip()})
                yield Request(
                    link.url,
                    callback=self.parse,
                    meta={"curdepth": curdepth + 1, "priority": int(meta.get("priority", 1)) - 10},
                )
        yield item
