"""Issue 16 item 4: a broad crawl end to end, with the default throttle against the throttle off.

One hub page links to HOSTS hosts of the project's own site server (utils/demosite/broad.py, addresses
in 127.1.0.0/16), PAGES pages each. Two `shoal crawl` processes crawl it from the hub (maxdepth 2)
twice in one run: with the throttle off (QUEUE_HITS=0) and with the default throttle (QUEUE_HITS per
QUEUE_WINDOW, moderated: one fetch per host every window/hits seconds). The server runs in its own
process and logs the arrival time of every request; politeness is checked from that log, not from
Shoal's counters: the smallest gap between two page fetches of one host, as a share of the interval
(robots.txt, fetched once per host by Scrapy's robots middleware, is not a page fetch).
Targets: throttled pages/s >= 0.8 x min(hosts x hits / window, the throttle-off pages/s); every page
crawled once; no two page fetches of one host closer than 0.9 x the interval.
`--tier`: the default throttle without and with the disk tier (a tiny FRONTIER_WINDOW, so most of
each host's queue is on disk and a redis monitor moves it), interleaved rounds: pages/s >= 0.95x
without, 0 dry windows, the same politeness.
Run: `python -m bench.broad_crawl [--hosts 2000] [--pages 5] [--tier --window 2 --rounds 2]`.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import os
import resource
import shutil
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from bench.common import bench_cluster, print_checks, write_result
from tests.e2e.test_crawler_helpers import crawler_started, seed
from tests.support.cluster import TestCluster
from tests.support.postgres import start_postgres
from tests.support.services import wait_until
from tests.support.tier import tier_dsn
from utils.config.clients import redis_client
from utils.config.settings import Settings, default_values
from utils.demosite import SiteServer
from utils.demosite.broad import HUB, broad_site
from utils.frontier import keys, progress
from utils.frontier.progress import CrawlRef
from utils.services import free_port
from utils.services.process import port_in_use

_DEFAULTS = Settings(default_values())
HITS, WINDOW = _DEFAULTS.get_int("QUEUE_HITS"), _DEFAULTS.get_float("QUEUE_WINDOW")
CRAWLERS = 2


def serve(hosts: int, pages: int, port: int, log: str) -> None:
    """The site server's own process (one listening socket per host: raise the open-files limit)."""
    _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    asyncio.run(SiteServer(broad_site(hosts, pages, port), access_log=Path(log)).serve_forever())


def crawl(cluster: TestCluster, url: str, crawlid: str, expected: int) -> dict[str, Any]:
    """Seed the hub, wait until the crawl settles; pages/s between the first and the last page."""
    crawlers = [cluster.start("crawl", "--spider", "link", name=f"{crawlid}-{i}") for i in range(CRAWLERS)]
    wait_until(lambda: crawler_started(cluster, CRAWLERS), timeout=120)
    client = redis_client(cluster.settings)
    seed(cluster, url, crawlid=crawlid, maxdepth=2)
    ref = CrawlRef("link", "testapp", crawlid)
    first = 0.0
    started = time.monotonic()
    while True:
        reading = progress.read(client, ref)
        crawled = reading.count("crawled") if reading else 0
        if crawled and not first:
            first = time.time()
        if crawled and reading is not None and not reading.pending:
            break
        if time.monotonic() - started > 900:
            raise TimeoutError(f"{crawlid}: {crawled} of {expected} pages after 900 s")
        time.sleep(0.1)
    last = time.time()
    for crawler in crawlers:
        crawler.stop()
    seconds = last - first
    return {"pages": crawled, "seconds": round(seconds, 2), "pages_per_s": round((crawled - 1) / seconds, 1)}


def fetch_gaps(log: Path, since: float) -> tuple[dict[str, list[float]], int]:
    """Arrival times of page fetches per host after `since` (hub and robots.txt left out), and how
    many fetches repeated a (host, path) pair."""
    times: dict[str, list[float]] = defaultdict(list)
    seen: set[tuple[str, str]] = set()
    repeats = 0
    for line in log.read_text().splitlines():
        _client, _method, host, path, _status, at = line.split()
        if float(at) < since or host.startswith(HUB) or path == "/robots.txt":
            continue
        times[host].append(float(at))
        repeats += (host, path) in seen
        seen.add((host, path))
    return times, repeats


def tier_rounds(hub: str, log: Path, expected: int, rounds: int, window: int) -> dict[str, Any]:
    """The default throttle without and with the disk tier (FRONTIER_WINDOW `window`: most of each
    host's queue on disk; a redis monitor moves it), interleaved `rounds` times; each tier run's
    dry windows (a host's window emptied while its tail was on disk) and smallest fetch gap."""
    server, root = start_postgres()
    runs: list[dict[str, Any]] = []
    try:
        for r in range(rounds):
            for tier in (False, True):
                extra = {"FRONTIER_DISK_TIER_DSN": tier_dsn(server), "FRONTIER_WINDOW": str(window),
                         "FRONTIER_DISK_TIER_TABLE": f"tail_{r}"} if tier else {}  # fmt: skip
                since = time.time()
                with bench_cluster(ZOOKEEPER_ENABLED="false", **extra) as cluster:
                    if tier:
                        cluster.start("redis-monitor", name="redis-monitor")
                    figures = crawl(cluster, hub, f"{'tier' if tier else 'plain'}{r}", expected)
                    client = redis_client(cluster.settings, decode=True)
                    state = client.hgetall(keys.tier_state("link"))
                times, repeats = fetch_gaps(log, since)
                gaps = [b - a for ts in times.values() for a, b in zip(sorted(ts), sorted(ts)[1:], strict=False)]
                figures.update({"tier": tier, "repeats": repeats, "load_average_1m": round(os.getloadavg()[0], 1),
                                "min_gap_share_of_interval": round(min(gaps) / (WINDOW / HITS), 3) if gaps else 0.0,
                                "spilled": int(state.get("spilled", 0)), "refilled": int(state.get("refilled", 0)),
                                "dry_windows": int(state.get("dry", 0))})  # fmt: skip
                print(figures, flush=True)
                runs.append(figures)
    finally:
        server.service.stop()
        shutil.rmtree(root, ignore_errors=True)
    ratios = [on["pages_per_s"] / off["pages_per_s"] for off, on in zip(runs[::2], runs[1::2], strict=True)]
    return {"window": window, "runs": runs, "ratios": [round(r, 3) for r in ratios]}


def main_tier(args: argparse.Namespace, hub: str, log: Path, expected: int) -> int:
    found = tier_rounds(hub, log, expected, args.rounds, args.window)
    tier_runs = [r for r in found["runs"] if r["tier"]]
    figures = {"hosts": args.hosts, "pages_per_host": args.pages, "crawlers": CRAWLERS, **found}
    checks = {
        "pages/s with the tier >= 0.95x without (median of interleaved rounds)": sorted(found["ratios"])[
            len(found["ratios"]) // 2] >= 0.95,
        "the tier held most of each queue (spilled > half the pages)": all(
            r["spilled"] > expected / 2 for r in tier_runs),
        "no window ran dry while its tail was on disk": all(r["dry_windows"] == 0 for r in tier_runs),
        "every page crawled once": all(r["pages"] == expected and r["repeats"] == 0 for r in found["runs"]),
        "no two fetches of a host closer than 0.9x interval": all(
            r["min_gap_share_of_interval"] >= 0.9 for r in found["runs"]),
    }  # fmt: skip
    print_checks(checks)
    write_result("broad_crawl_tier", figures, checks)
    return 0 if all(checks.values()) else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--hosts", type=int, default=2000)
    parser.add_argument("--pages", type=int, default=5, help="pages per host, its index included")
    parser.add_argument("--tier", action="store_true", help="default throttle without and with the disk tier")
    parser.add_argument("--window", type=int, default=2, help="FRONTIER_WINDOW of the tier runs")
    parser.add_argument("--rounds", type=int, default=2, help="interleaved rounds of the tier runs")
    args = parser.parse_args()
    port = free_port()
    interval = WINDOW / HITS
    expected = 1 + args.hosts * args.pages
    with tempfile.TemporaryDirectory(prefix="shoal-broad-") as tmp:
        log = Path(tmp) / "access.log"
        server = multiprocessing.Process(target=serve, args=(args.hosts, args.pages, port, str(log)), daemon=True)
        server.start()
        try:
            wait_until(lambda: port_in_use(HUB, port), timeout=120)
            hub = f"http://{HUB}:{port}/"
            if args.tier:
                return main_tier(args, hub, log, expected)
            with bench_cluster(QUEUE_HITS=0, ZOOKEEPER_ENABLED="false") as cluster:
                off = crawl(cluster, hub, "off", expected)
            since = time.time()
            with bench_cluster(ZOOKEEPER_ENABLED="false") as cluster:  # the default throttle
                on = crawl(cluster, hub, "on", expected)
            times, repeats = fetch_gaps(log, since)
        finally:
            server.terminate()
    gaps = [b - a for ts in times.values() for a, b in zip(sorted(ts), sorted(ts)[1:], strict=False)]
    min_gap = min(gaps) / interval if gaps else 0.0
    close_pairs = sum(1 for g in gaps if g < 0.9 * interval)
    allowed = args.hosts * HITS / WINDOW
    ratio = on["pages_per_s"] / min(allowed, off["pages_per_s"])
    figures = {"hosts": args.hosts, "pages_per_host": args.pages, "crawlers": CRAWLERS, "interval_s": interval,
               "throttle_off": off, "throttled": on, "allowed_per_s": round(allowed, 1), "ratio": round(ratio, 3),
               "min_gap_share_of_interval": round(min_gap, 3), "pairs_closer_than_0.9_interval": close_pairs,
               "repeated_fetches": repeats, "hosts_fetched": len(times)}  # fmt: skip
    checks = {
        "throttled pages/s >= 0.8x min(allowed, throttle off)": ratio >= 0.8,
        "every page crawled once (both runs)": off["pages"] == on["pages"] == expected and repeats == 0,
        "no two fetches of a host closer than 0.9x interval": gaps != [] and min_gap >= 0.9,
    }
    print(
        f"broad crawl, {args.hosts} hosts x {args.pages} pages, {CRAWLERS} crawlers: throttle off "
        f"{off['pages_per_s']} pages/s, default throttle {on['pages_per_s']} pages/s (allowed {allowed:.1f}), "
        f"ratio {ratio:.2f}; smallest gap {min_gap:.3f} x interval, {close_pairs} pairs < 0.9 x"
    )
    print_checks(checks)
    write_result("broad_crawl", figures, checks)
    return 0 if all(checks.values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
