"""Each proxy group's health where an operator looks: the redis monitor's /metrics, the dashboard in
real headless Chromium, `shoal proxies`. Real processes and Redis; the pool's state is written by the
pool's own ban script (the crawl through tinyproxy is tests/e2e/test_proxy_pool_crawl.py)."""

from __future__ import annotations

import subprocess

import pytest

from tests.e2e.test_dashboard_browser import browser_page  # noqa: F401  (a fixture)
from tests.e2e.test_metrics_and_logs import scraped, start_with_metrics
from tests.integration.test_rest_helpers import base_url, client_of, gateway_cluster, redis_of
from tests.support.cluster import REPO
from tests.support.services import wait_until
from utils.proxies.pool import ProxyPool
from utils.services import free_port

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(180)]

DE1, DE2, PLAIN = (f"http://127.0.0.1:{free_port()}" for _ in range(3))
POOL = f"http://user:S3CRET-pw@{DE1[7:]}#region=de,type=residential,{DE2}#region=de,type=residential,{PLAIN}"
GROUP = "region=de,type=residential"


def test_metrics_the_dashboard_and_the_cli_show_each_groups_health(services, tmp_path, browser_page) -> None:  # noqa: F811
    with gateway_cluster(services, tmp_path, "kafka-monitor", PROXY_LIST=POOL, PROXY_GLOBAL_BAN_DOMAINS=2,
                         REST_SAMPLE_INTERVAL=1.0) as cluster:  # fmt: skip
        pool = ProxyPool.from_settings(cluster.settings, redis_of(cluster))
        for domain in ("a.test", "b.test"):  # two domains ban DE1: quarantined everywhere
            pool.ban(DE1, domain)
        pool.ban(PLAIN, "a.test")
        _, metrics = start_with_metrics(cluster, "redis-monitor", "redis-monitor")
        key = ("shoal_proxy_group_proxies", (("group", GROUP),))
        samples = wait_until(lambda: (got := scraped(metrics)) and key in got and got, timeout=60,
                             message="the redis monitor serves no proxy group metrics")  # fmt: skip
        assert samples[key] == 2
        assert samples[("shoal_proxy_group_healthy", (("group", GROUP),))] == 1
        assert samples[("shoal_proxy_group_bans", (("group", GROUP),))] == 2
        assert samples[("shoal_proxy_group_healthy", (("group", "default"),))] == 1
        assert samples[("shoal_proxy_group_quarantined_domains", (("group", "default"),))] == 1

        client_of(cluster).close()
        page = browser_page
        page.goto(f"{base_url(cluster)}/dashboard")
        row = page.wait_for_selector(f'tr[data-group="{GROUP}"]', timeout=20_000)
        assert row.inner_text().split("\t") == [GROUP, "1/2 healthy", "0", "2"]
        assert page.locator(f'tr[data-group="{GROUP}"] .pill.warn').count() == 1
        assert page.inner_text('tr[data-group="default"]').split("\t")[:2] == ["default", "1/1 healthy"]
        for label in (DE1, DE2):  # each proxy with its group
            assert GROUP in page.inner_text(f'#proxies tr:has-text("{label}")')
        for domain in ("a.test", "b.test", "c.test"):  # the last German proxy goes too: none is healthy
            pool.ban(DE2, domain)
        page.wait_for_selector(f'tr[data-group="{GROUP}"] .pill.bad', timeout=10_000)
        listing = subprocess.run([".venv/bin/python", "-m", "utils.cli.main", "proxies"], cwd=REPO, env=cluster.env,
                                 capture_output=True, text=True, timeout=60, check=True)  # fmt: skip
        html = page.content()
    assert f"group {GROUP}  0/2 healthy  5 domain quarantine(s)  requests=0 successes=0 bans=5" in listing.stdout
    assert "S3CRET" not in listing.stdout + listing.stderr + html
