"""Scrapy's redirect middlewares, keeping the answers they follow.

Scrapy follows a 3xx (or a meta refresh) inside the downloader: only the last answer becomes a
page, so the redirect itself and the URL asked for would be in no archive. These subclasses hand
each followed answer on to the request that follows it (`REDIRECTS` in its meta, in order); the
page message carries them as `redirects` (so does the failure message of a chain that ended in
"max redirections reached") and the warc component writes each one as a response with its request,
before the page's own (docs/how-to/archive.md).
"""

from __future__ import annotations

from typing import Any

from scrapy import Request
from scrapy.downloadermiddlewares.redirect import MetaRefreshMiddleware, RedirectMiddleware
from scrapy.exceptions import IgnoreRequest
from scrapy.http import Response

from crawler.meta import REDIRECTS
from crawler.page import hop_message


def keep_hop(request: Request, response: Response, result: Request | Response) -> Request | Response:
    """`result` (what the redirect middleware answered), carrying `response` when it follows it."""
    if isinstance(result, Request) and result is not request:
        result.meta[REDIRECTS] = [*request.meta.get(REDIRECTS, ()), hop_message(request, response)]
    return result


class ArchivedRedirectMiddleware(RedirectMiddleware):
    def process_response(self, request: Request, response: Response) -> Any:  # type: ignore[override]
        try:
            result = super().process_response(request, response)
        except IgnoreRequest:  # max redirections reached: this answer was received all the same
            request.meta[REDIRECTS] = [*request.meta.get(REDIRECTS, ()), hop_message(request, response)]
            raise
        return keep_hop(request, response, result)


class ArchivedMetaRefreshMiddleware(MetaRefreshMiddleware):
    def process_response(self, request: Request, response: Response) -> Any:  # type: ignore[override]
        return keep_hop(request, response, super().process_response(request, response))
