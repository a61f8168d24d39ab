"""Rendering: pages/s and peak memory of one render process, next to plain fetching of the same pages.

`.venv/bin/python -m bench.render` serves 4 hosts x 500 scripted pages (utils/demosite/scripted.py:
an empty shell whose script fetches its JSON and writes the text and links) from a separate process,
then, with the throttle off, in one run:
  1. one `shoal crawl --spider link` process fetches the 2,000 pages plainly (all seeded, maxdepth 0:
     a plain fetch finds no link to follow on them);
  2. one `shoal crawl --spider render` process crawls them from the 4 `/js/0.html` seeds, following
     the links that exist only in the rendered DOM, each page settled on `attrs.wait_for = "#ready"`.
Throughput is pages/s from the seeding to the last page (the render figure includes the browser's
start). Every 0.5 s the bench measures the render process's own RSS, its Playwright driver's RSS
and its browser's memory (PSS summed over the Chromium processes, as the process itself measures
it to decide restarts). Targets: every page arrives; the
browser's peak stays under RENDER_BROWSER_MEMORY_MAX (the process restarts it before); the crawler
process itself stays under CRAWLER_RSS_MAX. Writes bench/results/render.json.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import threading
import time
from collections import deque
from typing import Any

import psutil

from bench.common import bench_cluster, print_checks, write_result
from tests.support.cluster import TestCluster
from tests.support.services import wait_until
from utils.config.clients import redis_client
from utils.demosite import SiteServer, add_scripted_pages, generate_site, scripted_seeds, scripted_urls
from utils.demosite.generator import Site
from utils.demosite.scripted import READY_SELECTOR
from utils.frontier import Frontier, NewRequest, crawl_request, keys, progress
from utils.frontier.domains import url_domain
from utils.frontier.fingerprint import fingerprint
from utils.frontier.progress import CrawlRef
from utils.observability.process_memory import MIB, descendants, named, tree_pss
from utils.services import free_port

HOSTS = 4
SITE = {"hosts": HOSTS, "pages_per_host": 5, "seed": 20, "network": "127.20.0", "base_ip_octet": 50}
DEPTH = 100  # the schema's most
BROWSER_MEMORY_MAX = 768  # MiB; RENDER_BROWSER_MEMORY_MAX of the run (the default)
CRAWLER_RSS_MAX = 256  # MiB; the render process's own resident memory, browser excluded
SHOAL = {"QUEUE_HITS": 0, "ZOOKEEPER_ENABLED": "false", "SCHEDULER_IDLE_POLL": 0.05, "SCHEDULER_FLUSH_INTERVAL": 0.05,
         "RENDER_BROWSER_MEMORY_MAX": BROWSER_MEMORY_MAX, "RENDER_STATS_INTERVAL": 1.0,
         "LEASE_TIMEOUT": 60}  # fmt: skip


def build_site(port: int, pages_per_host: int) -> Site:
    site = generate_site(port=port, **SITE)  # type: ignore[arg-type]
    add_scripted_pages(site, pages_per_host, seed=20)
    return site


def serve(port: int, pages_per_host: int) -> None:
    """The site server's own process: the crawler's CPU is not shared with it through the GIL."""
    asyncio.run(SiteServer(build_site(port, pages_per_host)).serve_forever())


def reachable(site: Site, seeds: list[str], depth: int) -> set[str]:
    """The scripted pages a rendering crawl reaches from `seeds` within `depth` (breadth first)."""
    depths = dict.fromkeys(seeds, 0)
    queue = deque(seeds)
    while queue:
        url = queue.popleft()
        if depths[url] < depth:
            for link in site.pages[url].rendered_links:
                if link not in depths:
                    depths[link] = depths[url] + 1
                    queue.append(link)
    return set(depths)


def enqueue(cluster: TestCluster, urls: list[str], spiderid: str, crawlid: str, **fields: Any) -> None:
    """Queue seeds as the kafka monitor writes them, in one batch."""
    entries = []
    for url in urls:
        record = crawl_request.to_record({"url": url, "appid": "bench", "crawlid": crawlid, "spiderid": spiderid,
                                          "priority": 1, **fields})  # fmt: skip
        entries.append(NewRequest(spiderid=spiderid, domain=url_domain(url), priority=1, appid="bench",
                                  crawlid=crawlid, payload=crawl_request.encode(record),
                                  fingerprint=fingerprint(url), seed=True))  # fmt: skip
    Frontier.from_settings(cluster.settings, redis_client(cluster.settings)).enqueue(entries)


class MemorySampler(threading.Thread):
    """Peak memory of a crawler process, its Playwright driver and its browser, every `interval` s."""

    def __init__(self, pid: int, interval: float = 0.5) -> None:
        super().__init__(daemon=True)
        self.pid, self.interval = pid, interval
        self.peak = {"crawler_rss": 0, "driver_rss": 0, "browser_pss": 0}
        self.stop_event = threading.Event()

    def run(self) -> None:
        while not self.stop_event.wait(self.interval):
            crawler_rss = _rss(self.pid)
            driver = sum(_rss(p.pid) for p in descendants(self.pid, named("node")))
            browser = tree_pss(descendants(self.pid, named("chromium", "chrome", "headless_shell")))
            for name, value in (("crawler_rss", crawler_rss), ("driver_rss", driver), ("browser_pss", browser)):
                self.peak[name] = max(self.peak[name], value)


def _rss(pid: int) -> int:
    try:
        return int(psutil.Process(pid).memory_info().rss)
    except psutil.Error:
        return 0


def run_crawl(cluster: TestCluster, spider: str, crawlid: str, seed: Any) -> dict[str, Any]:
    """Start one crawler of `spider`, call `seed()`, and time it from the first page to the last."""
    crawler = cluster.start("crawl", "--spider", spider, name=crawlid)
    wait_until(lambda: "Scheduler opened" in crawler.log_path.read_text(), timeout=120)
    sampler = MemorySampler(crawler.pid)
    sampler.start()
    first = time.time()  # from the seeding: a plain crawl of a few seconds has no "first page" to speak of
    seed()
    client = redis_client(cluster.settings)
    crawl = CrawlRef(spider, "bench", crawlid)
    while True:
        reading = progress.read(client, crawl)
        done = reading.count("crawled") if reading else 0
        if done and reading is not None and not reading.pending:
            last = time.time()
            break
        time.sleep(0.05)
    sampler.stop_event.set()
    sampler.join()
    figures = {"pages": done, "failed": reading.count("failed") + reading.count("dead"),
               "seconds": round(last - first, 1), "pages_per_s": round(done / (last - first), 2),
               **{f"peak_{k}_mib": round(v / MIB, 1) for k, v in sampler.peak.items()}}  # fmt: skip
    crawler.stop()
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--pages-per-host", type=int, default=500, help="scripted pages per host (4 hosts)")
    pages_per_host = parser.parse_args().pages_per_host
    port = free_port()
    site = build_site(port, pages_per_host)
    urls = scripted_urls(site)
    seeds = scripted_seeds(site)
    expected = reachable(site, seeds, DEPTH)
    assert len(urls) == HOSTS * pages_per_host
    assert expected == set(urls), "the seeds must reach every page"
    server = multiprocessing.get_context("spawn").Process(target=serve, args=(port, pages_per_host), daemon=True)
    server.start()
    try:
        with bench_cluster(**SHOAL) as cluster:
            plain = run_crawl(cluster, "link", "plain", lambda: enqueue(cluster, urls, "link", "plain"))
            rendered = run_crawl(cluster, "render", "rendered", lambda: enqueue(
                cluster, seeds, "render", "rendered", maxdepth=DEPTH, attrs={"wait_for": READY_SELECTOR}))
            figures_log = _render_figures(cluster)
    finally:
        server.terminate()
        server.join(10)
    figures = {"pages": len(urls), **{f"plain_{k}": v for k, v in plain.items()},
               **{f"render_{k}": v for k, v in rendered.items()}, **figures_log,
               "render_vs_plain": round(rendered["pages_per_s"] / plain["pages_per_s"], 4),
               "browser_memory_max_mib": BROWSER_MEMORY_MAX, "crawler_rss_max_mib": CRAWLER_RSS_MAX}  # fmt: skip
    checks = {
        "every page rendered, none failed": rendered["pages"] == len(urls) and rendered["failed"] == 0,
        "every page fetched plainly": plain["pages"] == len(urls),
        f"browser peak <= {BROWSER_MEMORY_MAX} MiB": rendered["peak_browser_pss_mib"] <= BROWSER_MEMORY_MAX,
        f"render process RSS <= {CRAWLER_RSS_MAX} MiB": rendered["peak_crawler_rss_mib"] <= CRAWLER_RSS_MAX,  # noqa: E501
    }
    print(f"render: {rendered['pages']} pages at {rendered['pages_per_s']} pages/s "
          f"(plain fetch {plain['pages_per_s']} pages/s); "
          f"peaks: render process {rendered['peak_crawler_rss_mib']} MiB, "
          f"browser {rendered['peak_browser_pss_mib']} MiB (bound {BROWSER_MEMORY_MAX}), "
          f"driver {rendered['peak_driver_rss_mib']} MiB; "
          f"browser restarts {figures_log.get('browser_restarts')}")  # fmt: skip
    print_checks(checks)
    path = write_result("render", figures, checks)
    print(f"written: {path}")
    return 0 if all(checks.values()) else 1


def _render_figures(cluster: TestCluster) -> dict[str, Any]:
    """The render process's own last report (restarts, its own measured peak)."""
    client = redis_client(cluster.settings, decode=True)
    for member in client.zrange(keys.RENDERERS, 0, -1):
        raw = client.hgetall(keys.render_figures(*member.rsplit(":", 1)))
        return {"browser_restarts": int(raw.get("browser_restarts", 0)),
                "browser_memory_restarts": int(raw.get("browser_memory_restarts", 0)),
                "self_reported_browser_peak_mib": round(float(raw.get("browser_memory_peak", 0)) / MIB, 1)}  # fmt: skip
    return {}


if __name__ == "__main__":
    raise SystemExit(main())
