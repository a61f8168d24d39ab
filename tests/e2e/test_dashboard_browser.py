"""The dashboard in real headless Chromium while the cluster crawls the local demo site.

Real processes (kafka monitor, crawler, redis monitor, gateway); the crawl is fed with
`shoal feed -f ... --follow`, whose progress bar must end at 100 %. The browser must show the
crawl's numbers, see them move, stream its pages, and end on the crawl's true totals. Screenshots
are kept in test-artifacts/ (dashboard.png mid-crawl, dashboard-finished.png at the end).
"""

from __future__ import annotations

import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import ujson
from playwright.sync_api import Page, sync_playwright

from tests.integration.test_rest_helpers import base_url, client_of, gateway_cluster, redis_of
from tests.support.cluster import REPO
from tests.support.services import wait_until
from utils.config.clients import kafka_producer
from utils.config.settings import Settings
from utils.demosite import SiteServer, generate_site
from utils.frontier import keys
from utils.services import free_port

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]

BASE_OCTET = 110  # 127.0.0.110-112: no other test serves there
MAXDEPTH = 10
CHROMIUM = Path("/usr/bin/chromium")  # Debian's package; Playwright never downloads a browser here
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]  # fmt: skip
ARTIFACTS = REPO / "test-artifacts"
ROW = 'tr[data-crawl="dashapp/dash1"]'
THROTTLE = {"QUEUE_HITS": 15, "QUEUE_WINDOW": 1, "QUEUE_MODERATED": False}  # ~45 pages/s: a crawl of ~15 s


@pytest.fixture
def site_server() -> Iterator[tuple[object, SiteServer]]:
    site = generate_site(hosts=3, pages_per_host=200, seed=5, base_ip_octet=BASE_OCTET, port=free_port())
    with SiteServer(site) as server:
        yield site, server


@pytest.fixture
def browser_page() -> Iterator[Page]:
    assert CHROMIUM.exists(), "install Debian's chromium: apt-get install -y chromium"
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1440, "height": 1100})
        yield page
        browser.close()


def number(page: Page, selector: str) -> int:
    return int(re.sub(r"[^0-9]", "", page.inner_text(selector)) or 0)


def show_dead_letters_pending_then_firing(page: Page, settings: Settings) -> None:
    """Issue 33: 61 dead letters in the last 5 minutes (over 0.2/s) are pending, then firing after
    ALERT_DEAD_LETTER_FOR (2 s here) on the "Sites pushing back" card."""
    producer = kafka_producer(settings)
    for i in range(61):
        producer.send(settings.topic("dead_letter"), key=str(i).encode(), value=b"{}")
    producer.close()
    alert = 'li[data-alert="ShoalDeadLettersGrowing"]'
    assert "61 dead letters" in page.wait_for_selector(f'{alert}[data-state="pending"]', timeout=15_000).inner_text()
    page.wait_for_selector(f'{alert}[data-state="firing"] .pill.bad', timeout=15_000)


def test_the_dashboard_shows_a_live_crawl(services, tmp_path, site_server, browser_page: Page) -> None:
    site, _server = site_server
    seeds = site.seed_urls()
    expected = site.reachable(seeds, MAXDEPTH, obey_robots=True)
    requests = tmp_path / "crawl.jsonl"
    crawl = {"appid": "dashapp", "crawlid": "dash1", "maxdepth": MAXDEPTH, "deny_extensions": []}
    requests.write_text("".join(ujson.dumps({"url": seed, **crawl}) + "\n" for seed in seeds))
    ARTIFACTS.mkdir(exist_ok=True)
    with gateway_cluster(services, tmp_path, "kafka-monitor", "redis-monitor", REST_SAMPLE_INTERVAL=1.0,
                         ALERT_DEAD_LETTER_FOR=2, METRICS_FRONTIER_CACHE=1, **THROTTLE) as cluster:  # fmt: skip
        cluster.start("crawl", "--spider", "link")
        client_of(cluster).close()
        page = browser_page
        page.goto(f"{base_url(cluster)}/dashboard")
        page.wait_for_selector('#health[data-health="GREEN"]', timeout=20_000)
        follow = subprocess.Popen(
            [sys.executable, "-m", "utils.cli.main", "feed", "-f", str(requests), "--follow"],
            cwd=REPO, env=cluster.env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        )  # fmt: skip

        page.wait_for_selector(f"{ROW}.running", timeout=60_000)
        first = wait_until(lambda: number(page, f"{ROW} .crawled"), timeout=30, interval=0.2)
        assert first < len(expected), "the crawl ended before the dashboard showed it running"
        moved = wait_until(lambda: number(page, f"{ROW} .crawled") > first, timeout=30, interval=0.2)
        assert moved
        wait_until(lambda: page.locator("#pages li[title^='http://127.0.0.']").count() >= 3, timeout=30)
        assert float(page.inner_text("#t-rate")) > 0
        assert number(page, "#p-crawler") == 1
        page.screenshot(path=str(ARTIFACTS / "dashboard.png"), full_page=True)

        page.wait_for_selector(f"{ROW}.finished", timeout=120_000)
        truth = redis_of(cluster).hgetall(keys.crawl_progress("link", "dashapp", "dash1"))
        assert number(page, f"{ROW} .crawled") == int(truth["crawled"]) == len(expected), sorted(truth.items())
        assert "done in" in page.inner_text(f"{ROW} .eta")
        assert "100.0%" in page.inner_text(f"{ROW} .progress")
        shown_at = page.inner_text("#updated")  # one more refresh, so the chart shows the crawl's whole curve
        wait_until(lambda: page.inner_text("#updated") != shown_at, timeout=10, interval=0.2)
        page.screenshot(path=str(ARTIFACTS / "dashboard-finished.png"), full_page=True)

        output, _ = follow.communicate(timeout=60)
        assert page.locator("#renderers-card").is_hidden()  # no render process reports
        redis = redis_of(cluster)
        redis.hset(keys.render_figures("render-host", "7"), mapping={"pages": 1234, "pages_per_sec": 2.5,
                   "process_memory": 110 * 2**20, "browser_memory": 400 * 2**20,
                   "browser_memory_peak": 480 * 2**20, "browser_restarts": 6})  # fmt: skip
        redis.zadd(keys.RENDERERS, {"render-host:7": time.time()})
        row = page.wait_for_selector('tr[data-renderer="render-host:7"]', timeout=10_000)
        assert row.inner_text().split("\t") == ["render-host:7", "2.50", "1,234", "110", "400 (480)", "6"]
        show_dead_letters_pending_then_firing(page, cluster.settings)
    assert follow.returncode == 0, output
    last = output.strip().splitlines()[-1]
    assert last.startswith("dashapp/dash1 ["), last
    for part in ("100.0%", "done in", f"crawled {len(expected)}"):
        assert part in last, last
