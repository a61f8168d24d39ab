"""Sites that push back (issue 33): one crawl of three hosts of utils/demosite/pushback.py by real
processes (kafka monitor, link crawler, render crawler on Debian's Chromium).

A host answering 429 + Retry-After past 4 requests in 2 s and a host banning the crawler's address
with 403 for 1.5 s after a burst (ladder [0, 1] from the settings): each is crawled whole, steps up
to slower (1) and back down, every step in its history, and while it is slower no two of its
fetches come closer than LADDER_SLOW_DELAY (server-side arrival times). A host serving a CAPTCHA to
clients without a browser (its marker and its ladder [0, 3] from ZooKeeper): it steps to the render
nodes (3), every page is fetched in Chromium, none other without a browser, and the clean rendered
pages count on the link spider's ladder: it steps back down to 0 after LADDER_DOWN_AFTER of them.
"""

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

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(240)]

SLOW = 0.7  # seconds between two hits of a domain at levels 1-3 (3 per 2 s: under the rate limit of 4)
SETTINGS = {
    "QUEUE_HITS": 1000, "QUEUE_WINDOW": 1, "QUEUE_MODERATED": False, "ROBOTSTXT_OBEY": False,
    "LADDER_LEVELS": "[0, 1]", "LADDER_UP_AFTER": 2, "LADDER_WINDOW": 30, "LADDER_DOWN_AFTER": 4,
    "LADDER_SLOW_DELAY": SLOW, "LADDER_REFRESH": 0.2, "RETRY_TIMES": 30, "RETRY_BACKOFF_BASE": 0.2,
    "RETRY_BACKOFF_MAX": 1.0, "RETRY_HTTP_CODES": "[429, 503, 403]",
    "RENDER_MAX_PAGES": 2, "RENDER_PAGES_PER_CONTEXT": 20, "RENDER_STATS_INTERVAL": 0.5,
}  # fmt: skip
GRACE = 1.0  # seconds after a step up: requests leased before it are fetched at the level they were leased at
RATE, BAN, CAPTCHA = "127.0.0.91", "127.0.0.92", "127.0.0.93"
CHROMIUM = Path("/usr/bin/chromium")


@pytest.mark.parametrize("cluster", [SETTINGS], indirect=True)
def test_pushing_hosts_are_crawled_whole_each_through_its_level_and_back(
    cluster: TestCluster, topic_reader: Any, zk_client: Any
) -> None:
    assert CHROMIUM.exists(), "install Debian's chromium: apt-get install -y chromium"
    config = {"domains": {CAPTCHA: {"blocks": {"markers": ["g-recaptcha"], "levels": [0, 3], "up_after": 2}}}}
    zk_client.ensure_path(cluster.settings.zookeeper_config_path)
    zk_client.set(cluster.settings.zookeeper_config_path, yaml.safe_dump(config).encode())
    client = redis_client(cluster.settings, decode=True)
    hosts = {RATE: Pushback(rate_limit=4, rate_window=2.0, retry_after=1),
             BAN: Pushback(ban_burst=4, ban_window=1.0, ban_seconds=1.5), CAPTCHA: Pushback(captcha=True)}  # fmt: skip
    with PushbackSite(hosts, free_port(), pages=10) as site:
        cluster.start("kafka-monitor")
        cluster.start("crawl", "--spider", "link", name="link")
        cluster.start("crawl", "--spider", "render", name="render")
        firehose = topic_reader("crawled_firehose")
        wait_until(lambda: client.zcard(keys.RENDERERS) > 0, timeout=60, message="no render node reported")
        requests = [{"url": seed, "appid": "pushapp", "crawlid": "push", "maxdepth": 20} for seed in site.seeds()]
        produce(cluster.settings.get_list("KAFKA_HOSTS")[0], cluster.settings.incoming_topic, requests)
        wanted = site.urls(RATE) | site.urls(BAN)
        captcha_paths = {url.split(str(site.port), 1)[1] for url in site.urls(CAPTCHA)}

        def fetched(pages: list[dict[str, Any]]) -> set[str]:
            return {p["url"] for p in pages if p.get("status_code") == 200 and p.get("success")}

        def in_browser() -> set[str]:
            return {hit.path for hit in site.log[CAPTCHA] if hit.browser and hit.status == 200}

        firehose.wait_for(lambda got: wanted <= fetched(got) and captcha_paths <= in_browser(), timeout=150,
                          message="every page")  # fmt: skip
        log = {ip: list(site.log[ip]) for ip in hosts}

    ladder = Ladder(client, 100, 600)
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

    history = ladder.state("link", CAPTCHA)["history"]
    assert [(s["from"], s["to"], s["reason"]) for s in history] == [(3, 0, "clean pages"), (0, 3, "marker")]
    plain = [hit for hit in log[CAPTCHA] if not hit.browser]
    assert len(plain) >= 2  # the CAPTCHA pages that moved it
    assert all(hit.path == "/" for hit in plain)  # nothing else was fetched without a browser
    print(f"{CAPTCHA}: {len(plain)} CAPTCHA answers, then {len(captcha_paths)} pages in the browser")


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
