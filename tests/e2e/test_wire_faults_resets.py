"""TCP resets in the middle of an operation, half-open links not covered elsewhere, and several faults
at once picked at random with a fixed seed, while crawls run through the whole pipeline.

Resets: every connection of the link is reset RESET_AFTER_MS after its data starts, for RESET_S, so
resets land inside a produce batch (crawler -> Kafka), an offset commit (kafka monitor and sink ->
Kafka) and a COPY/INSERT batch (sink -> PostgreSQL); the Lua-call reset is test_wire_faults.py's.
Half-open: the far side stops answering without a FIN until the component names the service (and
at least FAULT_S). After each fault every process is healthy within 30 s, and at the end every crawl
keeps the rules of tests/e2e/test_chaos.py in the firehose and the sink's tables.
"""

from __future__ import annotations

import contextlib
import random
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.support.services import wait_until
from tests.support.toxiproxy import Toxiproxy
from tests.support.wire import Wire
from tests.support.wire_cluster import DETECTED_WITHIN_S, SCRAPE_EVERY_S, Pipeline, healed, pipeline_on
from utils.demosite import SiteServer, generate_site
from utils.services import free_port

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(600)]

MAXDEPTH = 10
RESET_AFTER_MS, RESET_S = 150, 8.0
FAULT_S = 12.0
# A half-open link is named once a call on it has waited out its socket timeout (10 s) and the next
# one too: DETECTED_WITHIN_S, with more slack for a machine at load 30-40 where it was missed once.
HALF_OPEN_NAMED_WITHIN_S = DETECTED_WITHIN_S + 15
SEED = 45
# robots.txt not obeyed: a robots.txt fetch that fails under load allows every page, one that works
# refuses two of them, and the expected pages must not depend on which.
SETTINGS = {"QUEUE_HITS": 6, "QUEUE_WINDOW": 1, "CONCURRENT_REQUESTS": 4, "KAFKA_TOPIC_PARTITIONS": 3,
            "ROBOTSTXT_OBEY": False,
            "SINK_POSTGRES_OPERATION_TIMEOUT": 8.0}  # fmt: skip
RESETS = [("crawler", "kafka", "a produce batch"), ("kafka-monitor", "kafka", "an offset commit"),
          ("sink", "kafka", "an offset commit"), ("sink", "postgres", "a COPY/INSERT batch")]  # fmt: skip
# Not the redis monitor's links: its /metrics reads Redis in every collector (frontier, capacity, ladder,
# proxies, apps) and Kafka in the group-lag one, each waiting out its client timeout on a half-open
# link, so a scrape takes longer than a scraper waits; and an idle one sends nothing to Kafka that
# could fail. Its health cannot be read then (docs/operations/tests.md: found, not fixed yet).
HALF_OPEN = [("crawler", "redis"), ("kafka-monitor", "kafka"), ("kafka-monitor", "redis")]
LINKS = [("crawler", "redis"), ("crawler", "kafka"), ("crawler", "zookeeper"), ("kafka-monitor", "redis"),
         ("kafka-monitor", "kafka"), ("redis-monitor", "redis"), ("redis-monitor", "kafka"), ("sink", "postgres"),
         ("sink", "kafka"), ("revisit", "postgres"), ("rest", "redis"), ("rest", "kafka")]  # fmt: skip


@pytest.fixture
def site_server() -> Iterator[tuple]:
    site = generate_site(hosts=2, pages_per_host=60, seed=48, network="127.48.0", base_ip_octet=10, port=free_port())
    with SiteServer(site, delay=0.05) as server:
        yield site, server


@pytest.fixture
def pipeline(wire: Wire, site_server: tuple, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Pipeline]:
    schema = f"rst{int(time.time() * 1000) % 10**9}"
    with pipeline_on(wire, tmp_path, request, site_server[0], schema, MAXDEPTH, **SETTINGS) as started:
        yield started


def test_resets_mid_produce_commit_and_copy_lose_nothing(pipeline: Pipeline) -> None:
    pipeline.start()
    toxiproxy, lines = pipeline.faulted.wire.toxiproxy, []
    for role, service, operation in RESETS:
        link = Wire.link(role, service)
        crawlid = f"rst-{role}-{service}"
        pipeline.feed(crawlid)
        pipeline.wait_crawled(crawlid, 0.2)
        with toxiproxy.reset_peer(link, after_ms=RESET_AFTER_MS):
            time.sleep(RESET_S)
        lines.append(f"{link} reset mid {operation}: healthy {healed(pipeline.faulted, link):.1f} s after")
    lines += pipeline.check()
    print("\n" + "\n".join(lines))


def test_half_open_crawler_and_monitor_links_lose_nothing(pipeline: Pipeline) -> None:
    pipeline.start()
    faulted, lines = pipeline.faulted, []
    for role, service in HALF_OPEN:
        link = Wire.link(role, service)
        crawlid = f"half-{role}-{service}"
        pipeline.feed(crawlid)
        pipeline.wait_crawled(crawlid, 0.2)
        victim = faulted.of_role(role)
        with faulted.wire.toxiproxy.half_open(link):
            began = time.monotonic()
            wait_until(lambda v=victim, s=service: faulted.dependency_up(v, s) == 0, timeout=HALF_OPEN_NAMED_WITHIN_S,
                       interval=SCRAPE_EVERY_S, message=f"{victim.name} never reported {service} down")  # fmt: skip
            detected = time.monotonic() - began
            time.sleep(max(FAULT_S - detected, 0))
        lines.append(f"{link} half-open: named after {detected:.1f} s, healthy {healed(faulted, link):.1f} s after")
    lines += pipeline.check()
    print("\n" + "\n".join(lines))


def faults(toxiproxy: Toxiproxy) -> dict[str, Callable[[str], contextlib.AbstractContextManager[None]]]:
    return {
        "cut": toxiproxy.partition, "half-open": toxiproxy.half_open,
        "slow": lambda link: toxiproxy.latency(link, 300, jitter_ms=200),
        "reset": lambda link: toxiproxy.reset_peer(link, after_ms=RESET_AFTER_MS),
    }  # fmt: skip


def test_several_faults_at_once_at_random_with_a_fixed_seed_lose_nothing(pipeline: Pipeline) -> None:
    """Three rounds of two faults at once on two links, drawn with random.Random(SEED)."""
    pipeline.start()
    chooser, kinds, lines = random.Random(SEED), faults(pipeline.faulted.wire.toxiproxy), []
    for round_ in range(3):
        crawlid = f"random-{round_}"
        pipeline.feed(crawlid)
        pipeline.wait_crawled(crawlid, 0.2)
        drawn = [(Wire.link(*link), chooser.choice(sorted(kinds))) for link in chooser.sample(LINKS, 2)]
        with contextlib.ExitStack() as stack:
            for link, kind in drawn:
                stack.enter_context(kinds[kind](link))
            time.sleep(FAULT_S)
        named = ", ".join(f"{kind} {link}" for link, kind in drawn)
        lines.append(f"round {round_}: {named}: healthy {healed(pipeline.faulted, named):.1f} s after")
    lines += pipeline.check()
    print("\n" + "\n".join(lines))
