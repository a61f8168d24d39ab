"""Spider middlewares of the Shoal crawler."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable
from typing import Any

from scrapy import Request
from scrapy.http import Response

from crawler.meta import passthrough


class MetaPassthroughMiddleware:
    """Gives every request a spider yields its crawl's fields (appid, crawlid, attrs, limits, ...).

    As Scrapy Cluster's middleware, values the new request sets itself win, so a spider can route a
    request to another spider by setting `meta["spiderid"]`.
    """

    def process_spider_output(self, response: Response, result: Iterable[Any]) -> Iterable[Any]:
        for entry in result:
            yield self._fill(response, entry)

    async def process_spider_output_async(self, response: Response, result: AsyncIterator[Any]) -> AsyncIterator[Any]:
        async for entry in result:
            yield self._fill(response, entry)

    @staticmethod
    def _fill(response: Response, entry: Any) -> Any:
        if isinstance(entry, Request):
            for key, value in passthrough(response.meta).items():
                entry.meta.setdefault(key, value)
        return entry
