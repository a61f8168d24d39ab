"""Downloader middlewares: retryable statuses become failures, cookies stay per request."""

from __future__ import annotations

import time

import tldextract
from scrapy import Request
from scrapy.crawler import Crawler
from scrapy.downloadermiddlewares import cookies as scrapy_cookies
from scrapy.downloadermiddlewares.cookies import CookiesMiddleware
from scrapy.http import Response

from crawler.meta import LEASE
from crawler.retry import RetryableStatus
from crawler.signals import lease_fetched


class RetryStatusMiddleware:
    """A leased request answered with a status of RETRY_HTTP_CODES goes to the errback (retry)."""

    def __init__(self, codes: set[int]) -> None:
        self.codes = codes

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> RetryStatusMiddleware:
        return cls({int(code) for code in crawler.settings["SHOAL"]["RETRY_HTTP_CODES"]})

    def process_response(self, request: Request, response: Response) -> Response:
        if response.status in self.codes and LEASE in request.meta and not request.meta.get("dont_retry"):
            raise RetryableStatus(response)
        return response


class FetchTimeMiddleware:
    """Tells the scheduler when a leased request really goes to the network (after robots.txt and
    every other middleware), so the domain's throttle counts from the fetch, not the lease."""

    def __init__(self, crawler: Crawler) -> None:
        self.crawler = crawler

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> FetchTimeMiddleware:
        return cls(crawler)

    def process_request(self, request: Request) -> None:
        lease = request.meta.get(LEASE)
        if lease is not None:
            lease_fetched(self.crawler, lease, time.time())


# Scrapy's cookie middleware splits domains with a TLDExtract that fetches the public suffix list from
# the internet on first use; Shoal's uses the snapshot bundled with tldextract, never the network.
scrapy_cookies._split_domain = tldextract.TLDExtract(
    suffix_list_urls=(), cache_dir=None, include_psl_private_domains=True
)


class PerRequestCookiesMiddleware(CookiesMiddleware):
    """Scrapy Cluster's CustomCookiesMiddleware: a request sends only its own `cookie` field.

    The jar is emptied before every request, so a Set-Cookie of one page never leaks into the
    next request of the same (or another) crawl handled by this process.
    """

    def process_request(self, request: Request) -> Request | Response | None:  # type: ignore[override]
        self.jars.clear()
        return super().process_request(request)
