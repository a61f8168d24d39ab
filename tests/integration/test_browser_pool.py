"""The render spider's browser pool against Debian's real Chromium (no cluster, no network).

Pages are `about:blank`, so the figures depend only on the pool's own accounting.
"""

from __future__ import annotations

import asyncio
from contextlib import suppress
from pathlib import Path

import pytest

from crawler.browser import BrowserConfig, BrowserPool
from utils.observability.process_memory import MIB

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(180)]

CHROMIUM = "/usr/bin/chromium"


def config(**changes: object) -> BrowserConfig:
    values: dict[str, object] = {"executable": CHROMIUM, "max_pages": 2, "pages_per_context": 2,
                                 "pages_per_browser": 3, "memory_max": 4096 * MIB, "memory_interval": 0.0,
                                 "blocked": frozenset({"image"})}  # fmt: skip
    return BrowserConfig(**{**values, **changes})  # type: ignore[arg-type]


async def open_pages(pool: BrowserPool, count: int) -> list[str]:
    urls = []
    for _ in range(count):
        async with pool.page() as page:
            await page.goto("about:blank")
            urls.append(page.url)
    return urls


def test_contexts_and_browsers_are_replaced_after_their_page_counts() -> None:
    assert Path(CHROMIUM).exists(), "install Debian's chromium: apt-get install -y chromium"

    async def scenario() -> None:
        pool = BrowserPool(config())
        try:
            assert await open_pages(pool, 7) == ["about:blank"] * 7
            figures = pool.figures
            assert figures.pages == 7
            assert figures.restarts == 2  # browsers of pages 1-3, 4-6, 7-
            assert figures.contexts == 5  # per browser: pages (1,2)(3) (4,5)(6) (7)
            assert figures.memory_restarts == 0
            assert 0 < figures.memory < 4096 * MIB  # measured after each page (interval 0)
        finally:
            await pool.close()

    asyncio.run(scenario())


def test_a_browser_over_its_memory_bound_is_replaced_and_open_pages_are_bounded() -> None:
    async def scenario() -> None:
        pool = BrowserPool(config(memory_max=1 * MIB, pages_per_browser=0, pages_per_context=100))
        try:
            await open_pages(pool, 2)
            assert (pool.figures.memory_restarts, pool.figures.restarts) == (2, 2)  # every browser is over 1 MiB
            open_now = 0
            most = 0

            async def hold() -> None:
                nonlocal open_now, most
                async with pool.page():
                    open_now += 1
                    most = max(most, open_now)
                    await asyncio.sleep(0.3)
                    open_now -= 1

            await asyncio.gather(*(hold() for _ in range(5)))
            assert most == 2  # max_pages
        finally:
            await pool.close()

    asyncio.run(scenario())


def test_a_tab_is_kept_for_the_next_page_of_its_context_and_closed_when_its_page_failed() -> None:
    async def scenario() -> None:
        pool = BrowserPool(config(max_pages=1, pages_per_context=3, pages_per_browser=0))
        tabs = []
        try:
            for fails in (False, True, False, False, False):
                with suppress(RuntimeError):
                    async with pool.page() as page:
                        tabs.append(page)
                        await page.goto("about:blank")
                        if fails:
                            raise RuntimeError("the page did not settle")
            assert tabs[1] is tabs[0]  # the tab of the first page loads the second
            assert tabs[0].is_closed()  # whose page failed: closed, not handed on
            assert tabs[2] is not tabs[0]
            assert tabs[2].is_closed()  # page 3 retired its context, and its tab with it
            assert tabs[3] is not tabs[2]
            assert tabs[4] is tabs[3]
            assert not tabs[4].is_closed()
            assert pool.figures.contexts == 2
        finally:
            await pool.close()

    asyncio.run(scenario())


def test_the_settled_dom_is_read_once_the_selector_matches_and_other_selectors_fall_back() -> None:
    from crawler.rendering import _settled_html

    script = "setTimeout(() => document.body.insertAdjacentHTML('beforeend', '<div id=ready>ok</div>'), 150)"
    late = f"<p>shell</p><script>{script}</script>"  # the element comes 150 ms after the page loaded

    async def scenario() -> None:
        pool = BrowserPool(config(max_pages=1))
        try:
            async with pool.page() as page:
                await page.set_content(late)
                html = await _settled_html(page, "#ready")
                assert html is not None
                assert html.startswith("<html>")
                assert '<div id="ready">ok</div>' in html  # waited for: it was not there at first
                assert await _settled_html(page, "text=ok") is None  # Playwright's own engine: its wait
        finally:
            await pool.close()

    asyncio.run(scenario())
