"""`shoal demo`: serve the bundled demo site, feed a crawl of it, and show each page as it arrives.

Used by `make run` against the node `shoal up` started. The demo raises the throttle for its own
hosts through the ZooKeeper domain config (the way an operator would), so the default 10 hits per
60 s still applies to every other domain.
"""

from __future__ import annotations

import argparse
import time
import uuid
from typing import Any

import ujson
import yaml
from kafka import TopicPartition

from utils.cli.demo_sink import show_stored_pages
from utils.cli.kafka_tools import feed
from utils.config.clients import ensure_topics, kafka_consumer, zookeeper_client
from utils.config.settings import Settings
from utils.demosite import SiteServer, generate_site
from utils.frontier.domain_config import DomainConfig
from utils.frontier.domains import url_domain

DEMO_MAXDEPTH = 10
DEMO_HITS_PER_SECOND = 200


def raise_demo_throttle(settings: Settings, domains: list[str]) -> None:
    """Write a domain-update for each demo host into the ZooKeeper config node."""
    zk = zookeeper_client(settings)
    zk.start(timeout=10)
    try:
        path = settings.zookeeper_config_path
        zk.ensure_path(path)
        data, _stat = zk.get(path)
        config: dict[str, Any] = yaml.safe_load(data or b"") or {}
        config.setdefault("domains", {})
        config.setdefault("blacklist", [])
        for domain in domains:
            config["domains"][domain] = {"hits": DEMO_HITS_PER_SECOND, "window": 1, "scale": 1.0}
        DomainConfig.parse(yaml.safe_dump(config))  # refuse to write what the crawlers cannot read
        zk.set(path, yaml.safe_dump(config, default_flow_style=False).encode())
    finally:
        zk.stop()
        zk.close()


def firehose_at_end(settings: Settings) -> Any:
    """A consumer of the page firehose positioned at its end, before anything is fed."""
    topic = settings.topic("crawled_firehose")
    ensure_topics(settings, [topic, settings.incoming_topic])
    consumer = kafka_consumer(settings, [], None)
    partitions = consumer.partitions_for_topic(topic) or {0}
    assigned = [TopicPartition(topic, p) for p in sorted(partitions)]
    consumer.assign(assigned)
    consumer.seek_to_end(*assigned)
    for tp in assigned:
        consumer.position(tp)  # resolve the end offsets now, not after the first pages arrive
    return consumer


def demo_command(settings: Settings, args: argparse.Namespace) -> int:
    site = generate_site(hosts=args.hosts, pages_per_host=args.pages, port=args.port)
    seeds = site.seed_urls()
    expected = site.reachable(seeds, DEMO_MAXDEPTH, obey_robots=True)
    server = SiteServer(site)
    server.start_in_thread()
    try:
        raise_demo_throttle(settings, sorted({url_domain(u) for u in seeds}))
        consumer = firehose_at_end(settings)
        crawlid = f"demo-{uuid.uuid4().hex[:8]}"
        requests = [
            ujson.dumps(
                {
                    "url": seed,
                    "appid": "demo",
                    "crawlid": crawlid,
                    "maxdepth": DEMO_MAXDEPTH,
                    "deny_extensions": [],
                }
            )
            for seed in seeds
        ]
        print(f"demo site: {len(site.hosts)} hosts on port {args.port}, {len(expected)} reachable URLs")
        print(f"feeding crawl {crawlid}: {', '.join(seeds)}")
        started = time.monotonic()
        feed(settings, iter(requests))
        seen = follow_pages(consumer, crawlid, len(expected), args.timeout)
        elapsed = time.monotonic() - started
    finally:
        server.stop()
    hosts = {u.split("/")[2] for u in seen}
    print(
        f"\nsummary: {len(seen)} pages from {len(hosts)} hosts in {elapsed:.1f} s "
        f"({len(seen) / max(elapsed, 1e-9):.1f} pages/s); expected {len(expected)}"
    )
    stored = show_stored_pages(settings, crawlid, len(seen))
    print("the cluster is still running: `shoal status` shows it, `shoal down` stops it")
    if stored is not None and stored < len(seen):
        print(f"shoal demo: only {stored} of the {len(seen)} pages reached PostgreSQL; "
              "see the sink's log: `shoal status` names it")  # fmt: skip
        return 1
    return 0 if len(seen) >= len(expected) else 1


def follow_pages(consumer: Any, crawlid: str, expected: int, timeout: float) -> set[str]:
    """Print each page of the crawl as it arrives, with a running count."""
    seen: set[str] = set()
    deadline = time.monotonic() + timeout
    while len(seen) < expected and time.monotonic() < deadline:
        for record in (r for part in consumer.poll(timeout_ms=200).values() for r in part):
            page = ujson.loads(record.value)
            if page.get("crawlid") != crawlid:
                continue
            seen.add(page["url"])
            print(f"[{len(seen):4d}/{expected}] {page.get('status_code')} {page['url']}", flush=True)
    consumer.close()
    return seen
