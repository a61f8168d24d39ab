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
    request to another spider by setting `meta["spiderid"]`. The inherited fields are read from the
    page's meta once, at its first request (a page yields ~8 on the demo site).
    """

    def process_spider_output(self, response: Response, result: Iterable[Any]) -> Iterable[Any]:
        inherited: dict[str, Any] | None = None
        for entry in result:
            if isinstance(entry, Request):
                inherited = passthrough(response.meta) if inherited is None else inherited
                _fill(entry, inherited)
            yield entry

    async def process_spider_output_async(self, response: Response, result: AsyncIterator[Any]) -> AsyncIterator[Any]:
        inherited: dict[str, Any] | None = None
        async for entry in result:
            if isinstance(entry, Request):
                inherited = passthrough(response.meta) if inherited is None else inherited
                _fill(entry, inherited)
            yield entry


def _fill(request: Request, inherited: dict[str, Any]) -> None:
    """Inherited fields under the request's own (three dict operations instead of a setdefault per key)."""
    meta = request.meta
    own = dict(meta)
    meta.update(inherited)
    meta.update(own)
