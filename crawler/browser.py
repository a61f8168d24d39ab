"""One headless Chromium per render process, recycled before it leaks.

Browsers grow with every page they load (caches, detached DOMs, renderer fragmentation); the
systems Shoal learns from restart theirs every few dozen jobs. Here a page is always loaded in a
tab of the current *context*, replaced after RENDER_PAGES_PER_CONTEXT pages, and the current
*browser* is replaced after RENDER_PAGES_PER_BROWSER pages or as soon as its processes hold more
than RENDER_BROWSER_MEMORY_MAX MiB. A replaced context or browser is retired, not killed: pages
still open in it finish, and the last one to close it closes it. At most RENDER_MAX_PAGES tabs
exist; a tab that loaded its page is kept for the next page of its context (a new tab costs
Chromium a new renderer process: issue 37 measured ~3x the browser's CPU per page with a tab per
page); one whose page failed or timed out is closed, whatever state it was left in.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass, field
from typing import Any

import psutil
from playwright.async_api import Browser, BrowserContext, Page, Playwright, async_playwright
from playwright.async_api import Error as PlaywrightError

from utils.config.settings import Settings
from utils.observability.process_memory import MIB, descendants, named, tree_pss

log = logging.getLogger(__name__)

CHROMIUM_ARGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--disable-dev-shm-usage")  # fmt: skip
CHROMIUM_NAMES = ("chromium", "chrome", "headless_shell")
CDP_TYPES = {name.lower(): name for name in ("Document", "Stylesheet", "Image", "Media", "Font", "Script", "TextTrack",
             "XHR", "Fetch", "Prefetch", "EventSource", "WebSocket", "Manifest", "Ping", "Other")}  # fmt: skip
CLOSE_TIMEOUT = 5.0  # seconds; a hung browser must not hold a page's download (and its lease) forever


@dataclass(frozen=True)
class BrowserConfig:
    executable: str
    max_pages: int
    pages_per_context: int
    pages_per_browser: int  # 0 = never restart by count
    memory_max: int  # bytes
    memory_interval: float  # seconds
    blocked: frozenset[str]

    @classmethod
    def from_settings(cls, settings: Settings) -> BrowserConfig:
        return cls(
            executable=settings.get_str("RENDER_BROWSER_PATH"),
            max_pages=max(1, settings.get_int("RENDER_MAX_PAGES")),
            pages_per_context=max(1, settings.get_int("RENDER_PAGES_PER_CONTEXT")),
            pages_per_browser=max(0, settings.get_int("RENDER_PAGES_PER_BROWSER")),
            memory_max=int(settings.get_float("RENDER_BROWSER_MEMORY_MAX") * MIB),
            memory_interval=settings.get_float("RENDER_MEMORY_CHECK_INTERVAL"),
            blocked=frozenset(settings.get_list("RENDER_BLOCKED_RESOURCES")),
        )


@dataclass(eq=False)
class _Generation:
    """A browser or a context with its counters; `retired` ones take no new page."""

    handle: Browser | BrowserContext
    pid: int | None = None  # the browser's main process (browsers only)
    opened: int = 0  # pages ever opened in it
    open: int = 0  # pages open now
    retired: bool = False
    idle: list[Page] = field(default_factory=list, repr=False)  # a context's tabs waiting for a page
    parent: _Generation | None = field(default=None, repr=False)  # a context's browser


@dataclass
class BrowserFigures:
    """What the render metrics and the dashboard show of this process's browser."""

    pages: int = 0
    restarts: int = 0  # browsers replaced (count, memory or crash)
    memory_restarts: int = 0
    contexts: int = 0
    memory: int = 0  # bytes, last measurement of the current browser
    memory_peak: int = 0


class BrowserPool:
    def __init__(self, config: BrowserConfig) -> None:
        self.config = config
        self.figures = BrowserFigures()
        self._slots = asyncio.Semaphore(config.max_pages)
        self._lock = asyncio.Lock()
        self._playwright: Playwright | None = None
        self._browser: _Generation | None = None
        self._context: _Generation | None = None
        self._measured_at = 0.0

    @asynccontextmanager
    async def page(self) -> AsyncIterator[Page]:
        """A tab of the current context: kept for the next page if the body returns, else closed."""
        async with self._slots:
            context = await self._acquire()
            try:
                page = context.idle.pop() if context.idle else await self._new_page(context)
            except BaseException:
                await self._release(context)
                raise
            kept = False
            try:
                yield page
                kept = not context.retired and not page.is_closed()
            finally:
                if kept:
                    context.idle.append(page)
                else:
                    await _close_page(page)
                await self._release(context)

    async def close(self) -> None:
        """Close every browser and the Playwright driver (on spider close)."""
        async with self._lock:
            for generation in (self._context, self._browser):
                if generation is not None:
                    await _close(generation)
            self._context = self._browser = None
            if self._playwright is not None:
                with suppress(Exception):
                    await self._playwright.stop()
                self._playwright = None

    async def _acquire(self) -> _Generation:
        async with self._lock:
            browser = self._browser
            if browser is None or browser.retired or not browser.handle.is_connected():  # type: ignore[union-attr]
                browser = await self._new_browser()
            context = self._context
            if context is None or context.retired or context.parent is not browser:
                context = await self._new_context(browser)
            for generation in (context, browser):
                generation.opened += 1
                generation.open += 1
            self.figures.pages += 1
            if context.opened >= self.config.pages_per_context:
                context.retired = True
            if self.config.pages_per_browser and browser.opened >= self.config.pages_per_browser:
                self._retire_browser("pages")
            return context

    async def _release(self, context: _Generation) -> None:
        browser = context.parent
        assert browser is not None
        context.open -= 1
        browser.open -= 1
        self._check_memory(browser)
        if context.retired and context.open == 0:
            await _close(context)
        if browser.retired and browser.open == 0:
            await _close(browser)

    async def _new_browser(self) -> _Generation:
        old = self._browser
        if old is not None and not old.retired:  # crashed: it takes no more pages
            self._retire_browser("crash")
        if self._playwright is None:
            self._playwright = await async_playwright().start()
        known = {p.pid for p in _browser_mains()}
        handle = await self._playwright.chromium.launch(executable_path=self.config.executable,
                                                        args=chromium_args(self.config.blocked))  # fmt: skip
        fresh = [p.pid for p in _browser_mains() if p.pid not in known]
        self._browser = _Generation(handle, pid=fresh[0] if fresh else None)
        self._measured_at = time.monotonic()
        log.info("Browser started", extra={"browser_pid": self._browser.pid, "restarts": self.figures.restarts})
        return self._browser

    async def _new_context(self, browser: _Generation) -> _Generation:
        old = self._context
        if old is not None:
            old.retired = True
            if old.open == 0:
                await _close(old)
        handle = await browser.handle.new_context()  # type: ignore[union-attr]
        self._context = _Generation(handle, parent=browser)
        self.figures.contexts += 1
        return self._context

    async def _new_page(self, context: _Generation) -> Page:
        page: Page = await context.handle.new_page()  # type: ignore[union-attr]
        paused = self.config.blocked - {"image"}  # images: Chromium's own setting (chromium_args)
        if paused:
            await block_resources(page, paused)
        return page

    def _retire_browser(self, reason: str) -> None:
        if self._browser is None or self._browser.retired:
            return
        self._browser.retired = True
        self.figures.restarts += 1
        if reason == "memory":
            self.figures.memory_restarts += 1
        log.info("Browser retired", extra={"reason": reason, "browser_pages": self._browser.opened,
                                           "browser_memory_mib": round(self.figures.memory / MIB, 1)})  # fmt: skip

    def _check_memory(self, browser: _Generation) -> None:
        """At most every RENDER_MEMORY_CHECK_INTERVAL: retire the browser past its memory bound."""
        now = time.monotonic()
        if browser.retired or browser.pid is None or now - self._measured_at < self.config.memory_interval:
            return
        self._measured_at = now
        self.figures.memory = browser_memory(browser.pid)
        self.figures.memory_peak = max(self.figures.memory_peak, self.figures.memory)
        if self.figures.memory > self.config.memory_max:
            self._retire_browser("memory")


def chromium_args(blocked: frozenset[str]) -> list[str]:
    """Chromium's command line: images blocked by Blink itself when "image" is blocked.

    A request failed through the Fetch domain waits for a round trip through the driver and this
    process, and the page's `load` waits for it (issue 37: goto 164 vs 134 ms per page with and
    without the pixel of the scripted pages paused, bench.render, load 9.7); a Blink setting
    never requests the image.
    """
    return [*CHROMIUM_ARGS, *(["--blink-settings=imagesEnabled=false"] if "image" in blocked else [])]


async def block_resources(page: Page, kinds: frozenset[str]) -> None:
    """Requests of these resource types fail in the tab before they are sent ("blockedbyclient").

    Chromium's Fetch domain pauses only the requests of those types. A Playwright route on
    "**/*" paused every request of the page for a round trip through the driver and this process,
    and turned the HTTP cache off (issue 37: driver 18.8 ms CPU per page, render process 28.5).
    Frames of other sites run in their own renderer and are not covered.
    """
    session = await page.context.new_cdp_session(page)

    async def fail(event: dict[str, Any]) -> None:
        with suppress(PlaywrightError):  # the tab closed meanwhile
            await session.send("Fetch.failRequest", {"requestId": event["requestId"], "errorReason": "BlockedByClient"})

    session.on("Fetch.requestPaused", fail)
    patterns = [{"urlPattern": "*", "resourceType": CDP_TYPES[kind], "requestStage": "Request"}
                for kind in sorted(kinds) if kind in CDP_TYPES]  # fmt: skip
    await session.send("Fetch.enable", {"patterns": patterns})


def browser_memory(pid: int) -> int:
    """Bytes held by a browser: its main process and every process it started (PSS)."""
    try:
        main = psutil.Process(pid)
    except psutil.Error:
        return 0
    return tree_pss([main, *descendants(pid)])


def _browser_mains() -> list[psutil.Process]:
    """Browser main processes under this one: Chromium processes whose parent is not Chromium."""
    found = []
    for process in descendants(None, named(*CHROMIUM_NAMES)):
        with suppress(psutil.Error):
            parent = process.parent()
            if parent is None or not parent.name().startswith(CHROMIUM_NAMES):
                found.append(process)
    return found


async def _close_page(page: Page) -> None:
    with suppress(PlaywrightError, asyncio.TimeoutError):
        await asyncio.wait_for(page.close(), CLOSE_TIMEOUT)


async def _close(generation: _Generation) -> None:
    with suppress(Exception):  # a crashed or hung browser cannot be closed cleanly; it is dropped either way
        await asyncio.wait_for(generation.handle.close(), CLOSE_TIMEOUT)
