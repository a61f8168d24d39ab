"""Follow-up latency: from a spider yielding a request to that request's fetch starting (issue 37).

`.venv/bin/python -m bench.follow_up_latency` serves the bookshop (utils/demosite/bookshop.py: 5
shelves of 27 listing pages, 23 books a page) from its own process on 127.18.0.4 and runs one
`shoal crawl` process with the throttle off and 16 slots:
  - idle: the `hops` spider follows "next page" links only, one shelf at a time: each hop finds
    the crawler with nothing else to do (5 x 26 hops);
  - busy: the `hops_busy` spider follows every book too, all shelves at once: the next-page hops
    wait among 16 busy slots;
  - idle CPU: the crawler with nothing to crawl, its CPU over IDLE_SECONDS (60) from /proc.
Each request carries the time it was yielded; the time its fetch starts is taken at Scrapy's
`request_reached_downloader` (bench/follow_up_spiders.py). Prints p50/p99 per case and writes
bench/results/follow_up_latency.json. Target: idle p50 <= 20 ms; idle CPU < 0.5 % of a core.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import sys
import time
from pathlib import Path
from typing import Any

from bench.common import bench_cluster, percentile, print_checks, write_result
from tests.support.cluster import Component, TestCluster
from tests.support.kafka import TopicReader
from tests.support.services import wait_until
from utils.demosite import SiteServer
from utils.demosite.bookshop import generate_bookshop
from utils.services import free_port
from utils.services.process import port_in_use

HOST = "127.18.0.4"
BOOKSHOP = {"books": 3000, "shelves": 5, "per_page": 23, "seed": 37}
SHOAL = {"QUEUE_HITS": 0, "CONCURRENT_REQUESTS": 16, "CONCURRENT_REQUESTS_PER_DOMAIN": 16,
         "ZOOKEEPER_ENABLED": "false", "SPIDER_MODULES": "bench.follow_up_spiders"}  # fmt: skip
IDLE_SECONDS = float(os.environ.get("IDLE_SECONDS", "60"))
TARGET_IDLE_P50_MS = 20.0
TARGET_IDLE_CPU = 0.005  # share of one core


def serve(port: int) -> None:
    site, _ = generate_bookshop(f"{HOST}:{port}", **BOOKSHOP)
    asyncio.run(SiteServer(site).serve_forever())


def crawl(cluster: TestCluster, spider: str, seeds: list[str], pages: int) -> list[dict[str, Any]]:
    """Start a crawler of `spider`, crawl each seed in turn (a crawl each) until `pages` items of
    it arrived, and return every item."""
    from tests.e2e.test_crawler_helpers import seed

    crawler = cluster.start("crawl", "--spider", spider, name=spider)
    wait_until(lambda: "Scheduler opened" in crawler.log_path.read_text(), timeout=60)
    reader = TopicReader(cluster.settings.get_list("KAFKA_HOSTS")[0], cluster.settings.topic("items"))
    reader.poll(0.5)
    items: list[dict[str, Any]] = []
    try:
        for n, url in enumerate(seeds):
            crawlid = f"{spider}{n}"
            seed(cluster, url, crawlid=crawlid, spiderid=spider, maxdepth=100)
            deadline = time.monotonic() + 300
            while time.monotonic() < deadline:
                reader.poll(0.05)
                mine = [m["item"] for m in reader.messages if m["crawlid"] == crawlid]
                if len(mine) >= pages:
                    items += mine
                    break
            else:
                raise TimeoutError(f"{spider}: {len(mine)} of {pages} pages of {url}")
    finally:
        crawler.stop()
        reader.close()
    return items


def idle_cpu(cluster: TestCluster) -> float:
    """Share of one core a crawler with nothing to crawl spends over IDLE_SECONDS."""
    crawler: Component = cluster.start("crawl", "--spider", "hops", name="idle")
    try:
        wait_until(lambda: "Scheduler opened" in crawler.log_path.read_text(), timeout=60)
        time.sleep(5)  # start-up done
        before, started = _cpu_seconds(crawler.pid), time.monotonic()
        time.sleep(IDLE_SECONDS)
        return (_cpu_seconds(crawler.pid) - before) / (time.monotonic() - started)
    finally:
        crawler.stop()


def summary(items: list[dict[str, Any]], kind: str | None = None) -> dict[str, Any]:
    ms = [i["latency_ms"] for i in items if i["latency_ms"] is not None and kind in (None, i["kind"])]
    return {"hops": len(ms), "p50_ms": round(percentile(ms, 50), 1), "p99_ms": round(percentile(ms, 99), 1),
            "max_ms": round(max(ms), 1)}  # fmt: skip


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main() -> int:
    port = free_port()
    server = multiprocessing.Process(target=serve, args=(port,), daemon=True)
    server.start()
    site, catalogue = generate_bookshop(f"{HOST}:{port}", **BOOKSHOP)
    wait_until(lambda: port_in_use(HOST, port), timeout=60)
    shelves = sorted(u for u, p in site.pages.items() if u.endswith("/page/1.html"))
    per_shelf = catalogue.listing_pages // len(shelves)
    try:
        with bench_cluster(**SHOAL) as cluster:
            idle = crawl(cluster, "hops", shelves, per_shelf)
            busy = crawl(
                cluster, "hops_busy", [catalogue.seed_url], 1 + catalogue.listing_pages + len(catalogue.products)
            )
            cpu = idle_cpu(cluster)
    finally:
        server.terminate()
    figures = {"idle_next_page": summary(idle), "busy_next_page": summary(busy, "listing"),
               "busy_all": summary(busy), "idle_crawler_cpu_share": round(cpu, 5), "idle_seconds": IDLE_SECONDS,
               "loadavg": " ".join(Path("/proc/loadavg").read_text().split()[:3])}  # fmt: skip
    checks = {f"idle_p50_le_{TARGET_IDLE_P50_MS:g}ms": figures["idle_next_page"]["p50_ms"] <= TARGET_IDLE_P50_MS,
              "idle_cpu_lt_0.5pct": cpu < TARGET_IDLE_CPU}  # fmt: skip
    for name in ("idle_next_page", "busy_next_page", "busy_all"):
        row = figures[name]
        print(f"{name:<16} {row['hops']:>6} hops  p50 {row['p50_ms']:>7.1f} ms  p99 {row['p99_ms']:>7.1f} ms  "
              f"max {row['max_ms']:>7.1f} ms")  # fmt: skip
    print(f"idle crawler CPU: {100 * cpu:.2f} % of a core over {IDLE_SECONDS:g} s; load {figures['loadavg']}")
    print_checks(checks)
    print(f"written {write_result('follow_up_latency', figures, checks)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
