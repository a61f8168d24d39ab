"""The dashboard in headless Chromium (Debian's) turns the crawler's process card amber while its link
to ZooKeeper is cut, naming the service, and green again after the heal: a real crawler on the wire
(tests/support/wire.py) and the real gateway serving the dashboard.

The ZooKeeper link is the one cut because the crawler notices it without a crawl (kazoo drops a
connection silent for two thirds of its session timeout) and goes on crawling meanwhile; the card is
the same for every service a heartbeat names (rest/static/dashboard.js, processPill).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Page

from tests.e2e.test_crawler_helpers import crawler_started
from tests.e2e.test_dashboard_browser import ARTIFACTS, browser_page  # noqa: F401 - the fixture
from tests.support.cluster import TestCluster
from tests.support.services import wait_until
from tests.support.wire import Wire
from tests.support.wire_cluster import Faulted
from utils.services import free_port

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(240)]

CARD = 'tr[data-component="crawler"] .pill'
AMBER, GREEN = "rgb(210, 153, 34)", "rgb(63, 185, 80)"  # --warn and --ok of rest/static/dashboard.css


@pytest.fixture
def faulted(wire: Wire, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Faulted]:
    cluster = TestCluster(wire.services, tmp_path, REST_HEARTBEAT_INTERVAL=0.5)
    yield Faulted(wire, cluster)
    wire.toxiproxy.reset()
    cluster.stop_all()
    report = getattr(request.node, "rep_call", None)
    if report is not None and report.failed:
        print("\n".join(cluster.logs()))


def pill(page: Page) -> tuple[str, str]:
    """The crawler card's text and colour."""
    element = page.wait_for_selector(CARD, timeout=10_000)
    assert element is not None
    return element.inner_text(), element.evaluate("e => getComputedStyle(e).color")


def test_the_dashboard_turns_amber_while_the_crawler_cannot_reach_zookeeper_and_green_after(
    faulted: Faulted, browser_page: Page  # noqa: F811 - the fixture imported above
) -> None:
    rest_port = free_port()
    faulted.start("crawler", "crawl", "--spider", "link")
    faulted.start("rest", "rest", REST_PORT=rest_port)
    wait_until(lambda: crawler_started(faulted.cluster), timeout=60, message="the crawler did not start")
    page = browser_page
    page.goto(f"http://127.0.0.1:{rest_port}/dashboard")
    wait_until(lambda: pill(page) == ("ok", GREEN), timeout=30, message="the crawler's card is not green")
    with faulted.wire.toxiproxy.partition(Wire.link("crawler", "zookeeper")):
        wait_until(lambda: pill(page) == ("cannot reach zookeeper", AMBER), timeout=40,
                   message=f"the crawler's card is not amber naming zookeeper: {pill(page)}")  # fmt: skip
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "dashboard-link-down.png"), full_page=True)
    wait_until(lambda: pill(page) == ("ok", GREEN), timeout=40,
               message=f"the crawler's card is not green again after the heal: {pill(page)}")  # fmt: skip
