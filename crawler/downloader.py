"""Downloader middlewares: retryable statuses become failures, cookies stay per request, headers bounded."""

from __future__ import annotations

import logging
import time

import tldextract
from scrapy import Request
from scrapy.crawler import Crawler
from scrapy.downloadermiddlewares import cookies as scrapy_cookies
from scrapy.downloadermiddlewares.cookies import CookiesMiddleware
from scrapy.http import Headers, Response

from crawler.meta import FETCHED_AT, HEADERS_CUT, LEASE, RAW_HEADERS
from crawler.retry import RetryableStatus
from crawler.signals import lease_fetched

log = logging.getLogger(__name__)


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
        now = time.time()
        request.meta[FETCHED_AT] = now  # the page message's fetch_time (WARC-Date of its records)
        lease = request.meta.get(LEASE)
        if lease is not None:
            lease_fetched(self.crawler, lease, now)


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


# Headers the middlewares after this one act on: kept first, whatever a server sends before them.
_NEEDED = (b"Content-Type", b"Content-Encoding", b"Content-Length", b"Location", b"Retry-After", b"Date")


class ResponseHeaderBoundMiddleware:
    """A response keeps at most RESPONSE_HEADERS_COUNT_MAX header lines of RESPONSE_HEADERS_BYTES_MAX bytes in
    all (names and values); the lines past either bound are dropped and the page flagged.

    Issue 30: 20,000 headers of 2 KiB made a 41 MB page message that Kafka refused, so the page became a
    dead letter. First on the response's way back (after the network), so every other middleware and the
    page message see the bounded headers.
    """

    def __init__(self, count: int, size: int) -> None:
        self.count, self.size = count, size

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> ResponseHeaderBoundMiddleware:
        settings = crawler.settings["SHOAL"]
        return cls(settings.get_int("RESPONSE_HEADERS_COUNT_MAX"), settings.get_int("RESPONSE_HEADERS_BYTES_MAX"))

    def process_response(self, request: Request, response: Response) -> Response:
        kept, dropped = bound_headers(response.headers, self.count, self.size)
        # The lines as received, before HttpCompressionMiddleware drops Content-Encoding (issue 35: WARC).
        request.meta[RAW_HEADERS] = [[name.decode("latin-1"), value.decode("latin-1")]
                                     for name, values in kept.items() for value in values]  # fmt: skip
        if not dropped:
            return response
        request.meta[HEADERS_CUT] = True
        log.warning("Response headers cut", extra={"url": request.url[:200], "kept": len(kept), "dropped": dropped})
        return response.replace(headers=kept)


def bound_headers(headers: Headers, count: int, size: int) -> tuple[Headers, int]:
    """(the header lines that fit, how many lines did not); the lines of _NEEDED are taken first."""
    lines = sum(len(values) for _, values in headers.items())
    total = sum(len(name) * len(values) + sum(len(v) for v in values) for name, values in headers.items())
    if lines <= count and total <= size:
        return headers, 0
    kept: dict[bytes, list[bytes]] = {}
    room, left = size, count
    names = [name for name in _NEEDED if name in headers] + [name for name in headers if name not in _NEEDED]
    for name in names:
        for value in headers.getlist(name):
            if left and len(name) + len(value) <= room:
                kept.setdefault(name, []).append(value)
                room, left = room - len(name) - len(value), left - 1
    return Headers(kept), lines - sum(map(len, kept.values()))
