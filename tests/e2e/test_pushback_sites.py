"""Sites that push back (issue 33), crawled by real processes (utils/demosite/pushback.py).

A host answering 429 + Retry-After past 4 requests in 2 s and a host banning the crawler's address
with 403 for 1.5 s after a burst: each crawl ends with every page fetched; each domain steps up to
slower (1) and back down, every step in its history; and while a domain is slower, no two of its
fetches come closer than LADDER_SLOW_DELAY (server-side arrival times). A host serving a CAPTCHA to
clients without a browser: it steps to the render nodes (3) and every page is fetched in Chromium."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.cluster import TestCluster
from tests.support.kafka import produce
from tests.support.services import wait_until
from utils.config.clients import redis_client
from utils.demosite.pushback import Hit, Pushback, PushbackSite
from utils.frontier import keys
from utils.frontier.ladder import Ladder
from utils.services import free_port

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(180)]

SLOW = 0.7  # seconds between two hits of a domain at level 1 (3 per 2 s: under the rate limit of 4)
SETTINGS = {
    "QUEUE_HITS": 1000, "QUEUE_WINDOW": 1, "QUEUE_MODERATED": False, "ROBOTSTXT_OBEY": False,
    "LADDER_LEVELS": "[0, 1]", "LADDER_UP_AFTER": 2, "LADDER_WINDOW": 30, "LADDER_DOWN_AFTER": 4,
    "LADDER_SLOW_DELAY": SLOW, "LADDER_REFRESH": 0.2, "RETRY_TIMES": 30, "RETRY_BACKOFF_BASE": 0.2,
    "RETRY_BACKOFF_MAX": 1.0, "RETRY_HTTP_CODES": "[429, 503, 403]",
}  # fmt: skip
GRACE = 1.0  # seconds after a step up: requests leased before it are fetched at the level they were leased at
RATE, BAN = "127.0.0.91", "127.0.0.92"
CHROMIUM = Path("/usr/bin/chromium")


@pytest.mark.parametrize("cluster", [SETTINGS], indirect=True)
def test_pushing_hosts_are_crawled_whole_through_the_slower_level_and_step_back_down(
    cluster: TestCluster, topic_reader: Any
) -> None:
    hosts = {RATE: Pushback(rate_limit=4, rate_window=2.0, retry_after=1),
             BAN: Pushback(ban_burst=4, ban_window=1.0, ban_seconds=1.5)}  # fmt: skip
    with PushbackSite(hosts, free_port(), pages=10) as site:
        cluster.start("kafka-monitor")
        cluster.start("crawl", "--spider", "link")
        firehose = topic_reader("crawled_firehose")
        requests = [{"url": seed, "appid": "pushapp", "crawlid": "push1", "maxdepth": 20} for seed in site.seeds()]
        produce(cluster.settings.get_list("KAFKA_HOSTS")[0], cluster.settings.incoming_topic, requests)
        wanted = site.urls(RATE) | site.urls(BAN)

        def fetched(pages: list[dict[str, Any]]) -> set[str]:
            return {p["url"] for p in pages if p.get("status_code") == 200 and p.get("success")}

        pages = firehose.wait_for(lambda got: wanted <= fetched(got), timeout=120, message="every page")
        log = {ip: list(site.log[ip]) for ip in hosts}

    assert fetched(pages) == wanted
    ladder = Ladder(redis_client(cluster.settings, decode=True), 100, 600)
    for ip, reason, blocked in ((RATE, "status_429", 429), (BAN, "status_403", 403)):
        history = list(reversed(ladder.state("link", ip)["history"]))  # oldest first
        steps = [(s["from"], s["to"]) for s in history]
        assert (0, 1) in steps, f"{ip} never stepped up: {history}"
        assert (1, 0) in steps, f"{ip} never stepped down: {history}"
        assert all(s["reason"] == reason for s in history if s["to"] == 1)
        assert all(s["reason"] == "clean pages" for s in history if s["to"] == 0)
        assert any(hit.status == blocked for hit in log[ip])
        gaps = slow_gaps(log[ip], history)
        assert gaps, f"{ip}: no two fetches while slower"
        assert min(gaps) >= 0.9 * SLOW, f"{ip}: fetched {min(gaps):.3f} s apart at level 1"
        print(f"\n{ip}: {len(log[ip])} hits, steps {steps}, {len(gaps)} gaps at level 1, min {min(gaps):.3f} s")


def slow_gaps(hits: list[Hit], history: list[dict[str, Any]]) -> list[float]:
    """Gaps between consecutive hits that both fall while the domain was at level 1 (after GRACE)."""
    spans, start = [], None
    for step in history:
        if step["to"] == 1:
            start = step["at"] + GRACE
        elif start is not None:
            spans.append((start, step["at"]))
            start = None
    times = [hit.at for hit in hits if hit.path != "/robots.txt"]
    return [b - a for a, b in zip(times, times[1:], strict=False)
            if any(lo <= a and b <= hi for lo, hi in spans)]  # fmt: skip


CAPTCHA = "127.0.0.93"
RENDERING = {
    "QUEUE_HITS": 100, "QUEUE_WINDOW": 1, "QUEUE_MODERATED": False, "ROBOTSTXT_OBEY": False,
    "LADDER_REFRESH": 0.2, "LADDER_SLOW_DELAY": 0.2, "RETRY_TIMES": 30, "RETRY_BACKOFF_BASE": 0.2,
    "RETRY_BACKOFF_MAX": 1.0, "RENDER_MAX_PAGES": 2, "RENDER_PAGES_PER_CONTEXT": 20, "RENDER_STATS_INTERVAL": 0.5,
}  # fmt: skip


@pytest.mark.timeout(240)
@pytest.mark.parametrize("cluster", [RENDERING], indirect=True)
def test_a_captcha_host_moves_to_the_render_nodes_and_is_crawled_whole_in_a_browser(
    cluster: TestCluster, zk_client: Any
) -> None:
    """The CAPTCHA host's marker and its ladder ([0, 3]) come from ZooKeeper: two CAPTCHA pages take
    it to level 3, and its requests move to the render spider, whose browser gets every real page."""
    assert CHROMIUM.exists(), "install Debian's chromium: apt-get install -y chromium"
    config = {"domains": {CAPTCHA: {"blocks": {"markers": ["g-recaptcha"], "levels": [0, 3], "up_after": 2}}}}
    zk_client.ensure_path(cluster.settings.zookeeper_config_path)
    zk_client.set(cluster.settings.zookeeper_config_path, yaml.safe_dump(config).encode())
    client = redis_client(cluster.settings, decode=True)
    with PushbackSite({CAPTCHA: Pushback(captcha=True)}, free_port(), pages=8) as site:
        cluster.start("kafka-monitor")
        cluster.start("crawl", "--spider", "link", name="link")
        cluster.start("crawl", "--spider", "render", name="render")
        wait_until(lambda: client.zcard(keys.RENDERERS) > 0, timeout=60, message="no render node reported")
        request = {"url": site.seeds()[0], "appid": "pushapp", "crawlid": "captcha", "maxdepth": 20}
        produce(cluster.settings.get_list("KAFKA_HOSTS")[0], cluster.settings.incoming_topic, [request])
        paths = {url.split(str(site.port), 1)[1] for url in site.urls(CAPTCHA)}

        def in_browser() -> set[str]:
            return {hit.path for hit in site.log[CAPTCHA] if hit.browser and hit.status == 200}

        wait_until(lambda: paths <= in_browser(), timeout=120, message="every page in the browser")
        log = list(site.log[CAPTCHA])
    history = Ladder(client, 100, 600).state("link", CAPTCHA)["history"]
    assert [(s["from"], s["to"], s["reason"]) for s in history] == [(0, 3, "marker")]
    plain = [hit for hit in log if not hit.browser]
    assert len(plain) >= 2  # the CAPTCHA pages that moved it
    assert all(hit.path == "/" for hit in plain)  # nothing else was fetched without a browser
    print(f"\n{CAPTCHA}: {len(plain)} CAPTCHA answers, then {len(in_browser())} pages in the browser")
