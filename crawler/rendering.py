"""The render spider's download handler: a leased page is loaded in Chromium and answered as its DOM.

Only the page request went through the frontier (and so its domain's throttle); the scripts,
styles and XHRs the page fetches are its own and go straight from the browser. Requests Scrapy
makes by itself (robots.txt) have no lease and are fetched plainly. A page settles when the
network is idle (RENDER_SETTLE) or, when its crawl's `attrs.wait_for` names a CSS selector, when
that element exists (after `load`; SETTLED_HTML waits for it and reads the DOM in one call);
whatever does not settle within RENDER_TIMEOUT fails the attempt with `RenderTimeout`, a Twisted
TimeoutError, so the retry policy retries it and then dead-letters it: the handler always returns,
and the lease is always settled.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any, Literal, cast
from weakref import WeakKeyDictionary

from playwright.async_api import Error as PlaywrightError
from playwright.async_api import Page
from playwright.async_api import Response as PageResponse
from playwright.async_api import TimeoutError as PlaywrightTimeout
from scrapy import Request
from scrapy.core.downloader.handlers.base import BaseDownloadHandler
from scrapy.core.downloader.handlers.http11 import HTTP11DownloadHandler
from scrapy.crawler import Crawler
from scrapy.http import HtmlResponse, Response
from twisted.internet import error as twisted_error

from crawler.browser import BrowserConfig, BrowserPool
from crawler.meta import LEASE
from crawler.render_stats import Phases, RenderStats
from utils.config.settings import Settings

log = logging.getLogger(__name__)

Settle = Literal["networkidle", "load", "domcontentloaded"]
SETTLE_STATES = ("networkidle", "load", "domcontentloaded")


class RenderTimeout(twisted_error.TimeoutError):
    """The page did not settle within RENDER_TIMEOUT (retried like any download timeout)."""


class RenderError(twisted_error.ConnectError):
    """The browser could not load the page (connection refused, DNS, crash): retried."""


class Renderer:
    """The process's browser pool and figures, shared by the http and https handlers."""

    def __init__(self, crawler: Crawler) -> None:
        settings: Settings = crawler.settings["SHOAL"]
        settle = settings.get_str("RENDER_SETTLE")
        if settle not in SETTLE_STATES:
            raise ValueError(f"RENDER_SETTLE must be one of {SETTLE_STATES}, got {settle!r}")
        self.settle = cast(Settle, settle)
        self.timeout = settings.get_float("RENDER_TIMEOUT")
        self.pool = BrowserPool(BrowserConfig.from_settings(settings))
        # Taken before RENDER_TIMEOUT starts: the spider leases more requests than it has tabs (so no
        # tab waits for the frontier), and one waiting for a tab has not begun to render.
        self.tabs = asyncio.Semaphore(self.pool.config.max_pages)
        self.stats = RenderStats.from_crawler(crawler, self.pool.figures)
        self.phases = self.stats.phases = Phases(self.pool.config.max_pages)
        self.closed = False

    async def render(self, request: Request) -> Response:
        """The page as its rendered DOM, or RenderTimeout / RenderError (both retried)."""
        asked = time.monotonic()
        async with self.tabs:
            self.phases.add("wait_tab", time.monotonic() - asked)
            self.phases.tab_taken()
            try:
                return await self._timed(request)
            finally:
                self.phases.tab_freed()

    async def _timed(self, request: Request) -> Response:
        started = time.monotonic()
        try:
            response = await asyncio.wait_for(self._render(request), self.timeout)
        except (TimeoutError, PlaywrightTimeout):
            self.stats.failed()
            raise RenderTimeout(f"page did not settle within {self.timeout:g} s") from None
        except PlaywrightError as exc:
            self.stats.failed()
            raise RenderError(str(exc).splitlines()[0]) from None
        self.stats.rendered(time.monotonic() - started)
        return response

    async def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.stats.stop()
            await self.pool.close()

    async def _render(self, request: Request) -> HtmlResponse:
        mark = _Mark(self.phases)
        async with self.pool.page() as page:
            mark("page")
            page.set_default_timeout(self.timeout * 1000)  # ms; the outer limit still bounds the whole render
            selector = wait_selector(request.meta)
            answer = await page.goto(request.url, wait_until="load" if selector else self.settle)
            mark("goto")
            html = await _settled_html(page, selector) if selector else None
            mark("selector")
            if html is None:
                if selector:  # not plain CSS, or the page navigated meanwhile: Playwright's own wait
                    await page.wait_for_selector(selector, state="attached")
                html = await page.content()
            mark("content")
            response = await _response(request, page, answer, html)
            mark("response")
        mark("page_back")
        return response


class _Mark:
    """Adds the time since the previous mark to a phase."""

    def __init__(self, phases: Phases) -> None:
        self.phases = phases
        self.last = time.monotonic()

    def __call__(self, phase: str) -> None:
        now = time.monotonic()
        self.phases.add(phase, now - self.last)
        self.last = now


_RENDERERS: WeakKeyDictionary[Crawler, Renderer] = WeakKeyDictionary()


class RenderDownloadHandler(BaseDownloadHandler):
    lazy = False

    def __init__(self, crawler: Crawler) -> None:
        super().__init__(crawler)
        if crawler not in _RENDERERS:  # Scrapy makes one handler per scheme; one browser serves both
            _RENDERERS[crawler] = Renderer(crawler)
        self.renderer = _RENDERERS[crawler]
        self.plain = HTTP11DownloadHandler(crawler)

    async def download_request(self, request: Request) -> Response:
        lease = request.meta.get(LEASE)
        if lease is None:
            return await self.plain.download_request(request)
        if lease.received:
            self.renderer.phases.add("leased_to_handler", time.time() - lease.received)
        return await self.renderer.render(request)

    async def close(self) -> None:
        await self.renderer.close()
        await self.plain.close()


# The selector's element, then the DOM as Playwright's page.content() serialises it, in one call: a
# MutationObserver answers as the element appears, where wait_for_selector polls (its driver retries
# 20, 50, 100 ms apart), and a content() after it cost one more round trip (issue 37, bench.render,
# load 6-11: selector + content 223 -> 77-94 ms per page, 0.81-0.87x -> 0.99-1.38x plain Playwright's
# pages/s). None: not a CSS selector.
SETTLED_HTML = """async (selector) => {
  try { document.querySelector(selector); } catch (e) { return null; }
  if (!document.querySelector(selector)) {
    await new Promise((resolve) => {
      const observer = new MutationObserver(() => {
        if (document.querySelector(selector)) { observer.disconnect(); resolve(); }
      });
      observer.observe(document, {childList: true, subtree: true});
    });
  }
  let html = document.doctype ? new XMLSerializer().serializeToString(document.doctype) : "";
  return html + (document.documentElement ? document.documentElement.outerHTML : "");
}"""


async def _settled_html(page: Page, selector: str) -> str | None:
    """The DOM once `selector` matches, or None when only Playwright's wait can tell (see SETTLED_HTML)."""
    try:
        html = await page.evaluate(SETTLED_HTML, selector)
    except PlaywrightError as exc:
        if isinstance(exc, PlaywrightTimeout) or "context was destroyed" not in str(exc):
            raise
        return None  # the page navigated (a script's redirect): its next document is waited for as before
    return html if isinstance(html, str) else None


def wait_selector(meta: dict[str, Any]) -> str | None:
    """The CSS selector a crawl waits for (`attrs.wait_for`), if it gives a non-empty string."""
    attrs = meta.get("attrs")
    selector = attrs.get("wait_for") if isinstance(attrs, dict) else None
    return selector if isinstance(selector, str) and selector.strip() else None


async def _response(request: Request, page: Page, answer: PageResponse | None, html: str) -> HtmlResponse:
    """The rendered DOM as Scrapy's response, with the page's own status and headers."""
    status, headers = 200, {}
    if answer is not None:
        status = answer.status
        headers = {k: v for k, v in (await answer.all_headers()).items()
                   if k.lower() not in ("content-length", "content-encoding", "transfer-encoding")}  # fmt: skip
    headers["content-type"] = "text/html; charset=utf-8"  # the DOM serialised, whatever the source was
    return HtmlResponse(url=page.url, status=status, headers=headers, body=html.encode("utf-8"),
                        encoding="utf-8", request=request)  # fmt: skip
