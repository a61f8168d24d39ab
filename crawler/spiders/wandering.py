"""The `wandering` spider: every page to Kafka, then one random link onwards (Scrapy Cluster's).

Its walk is counted in `attrs["step"]` of each page; it ends when the chosen link was already
seen (dupefilter) or a page has no links.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from typing import Any

from scrapy import Request
from scrapy.http import Response

from crawler.spiders.base import RedisSpider
from crawler.spiders.link import page_links


class WanderingSpider(RedisSpider):
    name = "wandering"

    def parse(self, response: Response, **_: Any) -> Iterator[Any]:
        item = self.page(response)
        step = int(response.meta.get("step", 0))
        item["attrs"] = {**(item.get("attrs") or {}), "step": step}
        links = page_links(response, self.link_bounds)
        if links:
            link = random.choice(links)
            item["links"].append({"url": link.url, "text": link.text.strip()})
            yield Request(link.url, callback=self.parse, meta={"step": step + 1})
        yield item
