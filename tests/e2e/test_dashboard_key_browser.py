"""Issue 30, finding 10, in real headless Chromium: with REST_API_KEY set the dashboard asks for the key
once, the gateway keeps it in an HttpOnly cookie (no script can read it), the data then loads, the API
document opens with it, and a POST from the gateway's own page (it sends its Origin) is let through."""

from __future__ import annotations

import pytest
from playwright.sync_api import Dialog, Page

from tests.e2e.test_dashboard_browser import browser_page  # noqa: F401 - the fixture
from tests.integration.test_rest_helpers import base_url, client_of, gateway_cluster

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]

KEY = "browser-key-30"


def test_the_dashboard_keeps_the_key_in_an_httponly_cookie_and_works(services, tmp_path,
                                                                     browser_page: Page) -> None:  # noqa: F811
    page = browser_page
    prompts: list[str] = []

    def answer(dialog: Dialog) -> None:
        prompts.append(dialog.message)
        dialog.accept(KEY)

    page.on("dialog", answer)
    with gateway_cluster(services, tmp_path, REST_API_KEY=KEY) as cluster:
        client_of(cluster).close()
        root = base_url(cluster)
        page.goto(f"{root}/dashboard")
        page.wait_for_selector('#health[data-health="GREEN"]', timeout=30_000)
        assert len(prompts) == 1
        assert page.evaluate("document.cookie") == ""  # HttpOnly: the key is not readable by script
        (cookie,) = page.context.cookies()
        assert (cookie["name"], cookie["httpOnly"], cookie["sameSite"]) == ("shoal_api_key", True, "Strict")
        assert page.goto(f"{root}/openapi.json").status == 200  # the docs open with the dashboard's cookie
        stop = f"{root}/crawls/someapp/c1/stop"
        status = page.evaluate("(url) => fetch(url, {method: 'POST'}).then((r) => r.status)", stop)
        assert status == 200  # the dashboard's own origin (a foreign one: tests/integration/test_rest_csrf.py)
