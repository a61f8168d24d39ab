"""robots.txt answers to `<prefix>.robots_firehose`, so the archive keeps what the crawl obeyed.

Scrapy's RobotsTxtMiddleware fetches robots.txt itself (`engine.download_async`, no spider
callback, `dont_obey_robotstxt`), so no page message is ever made of it. This middleware, on the
answer's way back after redirects and content decoding, hands the final answer (its redirects in
`redirects`) to the Kafka pipeline; the warc component writes it like a page's response.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from scrapy import Request
from scrapy.crawler import Crawler
from scrapy.http import Response
from scrapy.http.request import NO_CALLBACK

from crawler.page import robots_message
from crawler.signals import robots_fetched

ROBOTS_BODY_MAX = 512 * 1024  # bytes carried; Google reads the first 500 KiB of a robots.txt (RFC 9309 2.5)


def is_robots_fetch(request: Request) -> bool:
    """A fetch RobotsTxtMiddleware made (a spider's own request for /robots.txt has a callback)."""
    if request.callback is not NO_CALLBACK or not request.meta.get("dont_obey_robotstxt"):
        return False
    chain = request.meta.get("redirect_urls") or (request.url,)
    return urlsplit(chain[0]).path == "/robots.txt"


class RobotsArchiveMiddleware:
    def __init__(self, crawler: Crawler) -> None:
        self.crawler = crawler

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> RobotsArchiveMiddleware:
        return cls(crawler)

    def process_response(self, request: Request, response: Response) -> Response:
        if is_robots_fetch(request):
            robots_fetched(self.crawler, robots_message(request, response, ROBOTS_BODY_MAX))
        return response
