"""Sites that push back (issue 33): one crawl of three hosts of utils/demosite/pushback.py by real
processes (kafka monitor, link crawler, render crawler on Debian's Chromium), at the default
RETRY_TIMES and LADDER_UP_AFTER, and LADDER_SLOW_DELAY scaled with the sites' own times.

A host answering 429 + Retry-After past 4 requests in 2 s and a host banning the crawler's address
with 403 for 1.5 s after a burst (ladder [0, 1, 4] from ZooKeeper): each is crawled whole, steps up
to slower (1) and back down, every step in its history, never to paused (only fetches at the slow
rung's own pace count against it, and none of those is refused), and while it is slower no two of
its fetches come closer than (1 - SLOT_SLACK) x LADDER_SLOW_DELAY, the first included (server-side
arrival times). A host serving a CAPTCHA to clients without a browser, with nothing but its marker
in ZooKeeper: it steps to slower after LADDER_UP_AFTER CAPTCHAs, to the render nodes (3) after as
many more at the slow pace, and every page is then fetched in Chromium, none other without a browser.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.cluster import TestCluster
from tests.support.kafka import produce
from tests.support.services import wait_until
from utils.config import default_settings
from utils.config.clients import redis_client
from utils.demosite.pushback import Hit, Pushback, PushbackSite
from utils.frontier import keys
from utils.frontier.ladder import Ladder
from utils.frontier.types import SLOT_SLACK
from utils.services import free_port

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]

SLOW = 2.5  # LADDER_SLOW_DELAY: its default 5 s halved; the 429s' Retry-After (1 s) stays shorter
SETTINGS = {
    "QUEUE_HITS": 1000, "QUEUE_WINDOW": 1, "QUEUE_MODERATED": False, "ROBOTSTXT_OBEY": False,
    "LADDER_SLOW_DELAY": SLOW, "RETRY_BACKOFF_BASE": 0.2, "RETRY_BACKOFF_MAX": 1.0,
    "RETRY_HTTP_CODES": "[429, 503, 403]",
    "RENDER_MAX_PAGES": 2, "RENDER_PAGES_PER_CONTEXT": 20, "RENDER_STATS_INTERVAL": 0.5,
}  # fmt: skip
GRACE = 0.5  # seconds after a step up within which requests leased at full speed before it reach the server
RATE, BAN, CAPTCHA = "127.0.0.91", "127.0.0.92", "127.0.0.93"
CHROMIUM = Path("/usr/bin/chromium")


@pytest.mark.parametrize("cluster", [SETTINGS], indirect=True)
def test_pushing_hosts_are_crawled_whole_each_through_its_level_and_back(
    cluster: TestCluster, topic_reader: Any, zk_client: Any
) -> None:
    assert CHROMIUM.exists(), "install Debian's chromium: apt-get install -y chromium"
    up_after = default_settings.LADDER_UP_AFTER
    for name in ("RETRY_TIMES", "LADDER_UP_AFTER", "LADDER_LEVELS", "LADDER_DOWN_AFTER", "LADDER_WINDOW"):
        assert cluster.settings.get(name) == getattr(default_settings, name), name
    slower = {"levels": [0, 1, 4], "down_after": 4}
    config = {"domains": {CAPTCHA: {"blocks": {"markers": ["g-recaptcha"]}}, RATE: {"blocks": slower},
                          BAN: {"blocks": slower}}}  # fmt: skip
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

        firehose.wait_for(lambda got: wanted <= fetched(got) and captcha_paths <= in_browser(), timeout=200,
                          message="every page")  # fmt: skip
        log = {ip: list(site.log[ip]) for ip in hosts}

    ladder = Ladder(client, 100, 600)
    for ip, reason, blocked in ((RATE, "status_429", 429), (BAN, "status_403", 403)):
        history = list(reversed(ladder.state("link", ip)["history"]))  # oldest first
        steps = [(s["from"], s["to"]) for s in history]
        assert (0, 1) in steps, f"{ip} never stepped up: {history}"
        assert (1, 0) in steps, f"{ip} never stepped down: {history}"
        assert all(s["to"] in (0, 1) for s in history), f"{ip}: refusals at full speed counted at 1: {history}"
        assert all(s["reason"] == reason for s in history if s["to"] == 1)
        assert all(s["reason"] == "clean pages" for s in history if s["to"] == 0)
        assert any(hit.status == blocked for hit in log[ip])
        gaps = slow_gaps(log[ip], history)
        assert gaps, f"{ip}: no two fetches while slower"
        assert min(gaps) >= (1 - SLOT_SLACK) * SLOW, f"{ip}: fetched {min(gaps):.3f} s apart at level 1"
        print(f"\n{ip}: {len(log[ip])} hits, steps {steps}, {len(gaps)} gaps at level 1, min {min(gaps):.3f} s")

    history = list(reversed(ladder.state("link", CAPTCHA)["history"]))
    assert [(s["from"], s["to"], s["reason"]) for s in history] == [(0, 1, "marker"), (1, 3, "marker")]
    plain = [hit for hit in log[CAPTCHA] if not hit.browser]
    assert all(hit.path == "/" for hit in plain)  # nothing else was fetched without a browser
    at_1 = [hit.at for hit in plain if history[0]["at"] < hit.at <= history[1]["at"]]
    assert len(at_1) >= up_after, f"left slower after {len(at_1)} CAPTCHAs at its pace"
    gaps = [b - a for a, b in zip([history[0]["at"], *at_1], at_1, strict=False)]
    assert min(gaps) >= (1 - SLOT_SLACK) * SLOW, f"CAPTCHAs at level 1 {min(gaps):.3f} s apart"
    print(f"{CAPTCHA}: {len(plain)} CAPTCHA answers ({len(at_1)} at level 1), then {len(captcha_paths)} pages "
          f"in the browser")


def slow_gaps(hits: list[Hit], history: list[dict[str, Any]]) -> list[float]:
    """The gap before each hit that falls while the domain was at level 1 (after GRACE), from the hit
    before it, whenever that came: the first slow fetch too keeps its distance."""
    spans, start = [], None
    for step in history:
        if step["to"] == 1:
            start = step["at"] + GRACE
        elif start is not None:
            spans.append((start, step["at"]))
            start = None
    times = [hit.at for hit in hits if hit.path != "/robots.txt"]
    return [b - a for a, b in zip(times, times[1:], strict=False) if any(lo <= b <= hi for lo, hi in spans)]
