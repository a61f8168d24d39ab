"""Sites that push back (issue 33), crawled by real processes: a host answering 429 + Retry-After
past 4 requests in 2 s and a host banning the crawler's address with 403 for 1.5 s after a burst
(utils/demosite/pushback.py). Each crawl ends with every page fetched; each domain steps up to
slower (1) and back down, every step in its history; and while a domain is slower, no two of its
fetches come closer than LADDER_SLOW_DELAY (server-side arrival times)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.cluster import TestCluster
from tests.support.kafka import produce
from utils.config.clients import redis_client
from utils.demosite.pushback import Hit, Pushback, PushbackSite
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
