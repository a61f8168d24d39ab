"""A crawl's `extract` and `near_duplicates`: the page's main content off the reactor, then its SimHash looked up.

A downloader middleware, last on a response's way back to the spider: an HTML page of a crawl that
asks goes to the extraction workers (utils/extract/pool.py) and the response waits, without holding
the reactor, for its fields; other downloads and parses go on meanwhile. The near-duplicate lookup
(one Redis script call) runs on the worker's dispatcher thread, after the extraction. A crawl that
asks for nothing costs one dict lookup per response: no worker is started, trafilatura never imported.
A page whose extraction fails still reaches the spider, flagged with `extract_error`.
"""

from __future__ import annotations

import logging
from functools import cached_property
from typing import Any
from urllib.parse import urlsplit

from scrapy import signals
from scrapy.crawler import Crawler
from scrapy.http import Request, Response, TextResponse
from twisted.internet import defer

from crawler.meta import EXTRACTED, NO_FOLLOW
from utils.config.clients import redis_client
from utils.config.settings import Settings
from utils.extract.pool import ExtractionPool, Job, Result
from utils.frontier import keys
from utils.frontier.domains import host_domain
from utils.frontier.near_duplicates import NearDuplicateIndex
from utils.frontier.shards import Shards
from utils.observability.metrics import record_dropped

log = logging.getLogger(__name__)

MIB = 1024 * 1024


def wanted(meta: dict[str, Any], default: tuple[str, ...]) -> tuple[tuple[str, ...], str | None]:
    """What the page's crawl asks for: the kinds to extract, and the near-duplicate mode (flag, skip, None)."""
    kinds = meta.get("extract")
    return (tuple(kinds) if kinds is not None else default), meta.get("near_duplicates")


def is_html(response: Response) -> bool:
    content_type = (response.headers.get(b"Content-Type") or b"text/html").split(b";")[0].strip().lower()
    return isinstance(response, TextResponse) and content_type in (b"text/html", b"application/xhtml+xml")


class ExtractionMiddleware:
    def __init__(self, crawler: Crawler, settings: Settings) -> None:
        self.settings = settings
        self.default = tuple(settings.get_list("EXTRACT_DEFAULT"))
        self.chars_max = settings.get_int("EXTRACT_BYTES_MAX")
        self.budget = settings.get_int("NEAR_DUPLICATE_HOST_BUDGET")
        self.shards = Shards.from_settings(settings)
        self._pool: ExtractionPool | None = None
        crawler.signals.connect(self.close, signal=signals.spider_closed)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> ExtractionMiddleware:
        return cls(crawler, crawler.settings["SHOAL"])

    @property
    def pool(self) -> ExtractionPool:
        """Started on the first page that asks: a crawler whose crawls never ask runs no worker."""
        if self._pool is None:
            settings = self.settings
            self._pool = ExtractionPool(settings.get_int("EXTRACT_WORKERS"), settings.get_float("EXTRACT_SECONDS_MAX"),
                                        settings.get_int("EXTRACT_MEMORY_MAX") * MIB)  # fmt: skip
        return self._pool

    @cached_property
    def index(self) -> NearDuplicateIndex:
        return NearDuplicateIndex.from_settings(self.settings, redis_client(self.settings))

    def close(self) -> None:
        if self._pool is not None:
            self._pool.close()

    def process_response(self, request: Request, response: Response) -> Response | defer.Deferred[Response]:
        kinds, mode = wanted(request.meta, self.default)
        if not kinds and not mode:
            return response
        if not 200 <= response.status < 300 or not is_html(response):
            return response
        assert isinstance(response, TextResponse)
        text = response.text
        job = Job(text[: self.chars_max], request.url, kinds, fingerprint=bool(mode))
        done: defer.Deferred[dict[str, Any]] = defer.Deferred()
        self.pool.submit(job, lambda result: self._finish(result, request, mode, done))
        cut = len(text) > self.chars_max

        def attach(fields: dict[str, Any]) -> Response:
            if cut:
                fields["extract_truncated"] = True
            request.meta[EXTRACTED] = fields
            return response

        return done.addCallback(attach)

    def _finish(self, result: Result, request: Request, mode: str | None, done: defer.Deferred[Any]) -> None:
        """On the pool's dispatcher thread: the near-duplicate lookup, then the fields handed to the reactor."""
        fields = dict(result.fields)
        if result.error is not None:
            fields["extract_error"] = result.error
            log.warning("Extraction failed", extra={"url": request.url[:200], "error": result.error})
        elif mode and fields.get("simhash"):
            try:
                fields.update(self._near_duplicate(request, mode, fields["simhash"]))
            except Exception as exc:  # noqa: BLE001 - Redis down: the page goes on unjudged, not lost
                log.error("Near-duplicate lookup failed", extra={"url": request.url[:200], "error": str(exc)})
        from twisted.internet import reactor  # the one Scrapy installed (importing it early installs the default)

        reactor.callFromThread(done.callback, fields)  # type: ignore[attr-defined]

    def _near_duplicate(self, request: Request, mode: str, fingerprint: str) -> dict[str, Any]:
        meta = request.meta
        appid, crawlid = str(meta.get("appid") or ""), str(meta.get("crawlid") or "")
        host = urlsplit(request.url).hostname or ""
        verdict = self.index.check(appid, crawlid, fingerprint, request.url, host)
        fields: dict[str, Any] = {"cluster_id": verdict.cluster_id}
        if not verdict.near_duplicate:
            return fields
        fields.update(near_duplicate=True, duplicate_of=verdict.duplicate_of)
        spiderid = str(meta.get("spiderid") or "")
        domain = host_domain(host)
        progress = self.shards.tag(domain) + keys.crawl_progress(spiderid, appid, crawlid)
        self.index.client.hincrby(progress, "near_duplicates", 1)
        if mode == "skip":
            fields["kept_out"] = True
            meta[NO_FOLLOW] = True
        elif verdict.host_near_duplicates > self.budget:
            meta[NO_FOLLOW] = True
            record_dropped(spiderid, "near_duplicate_host_budget")
        return fields
