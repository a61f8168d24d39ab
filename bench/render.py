"""Rendering: one render process against plain Playwright driving the same Chromium, same pages open.

`.venv/bin/python -m bench.render` serves 4 hosts x 75 scripted pages (utils/demosite/scripted.py:
an empty shell whose script fetches its JSON and writes the text and links) from a separate process,
then, with the throttle off, in one run:
  1. plain Playwright (`playwright_crawl`, its own process): one Chromium, one context,
     RENDER_MAX_PAGES pages reused, asyncio; it crawls from the 4 `/js/0.html` seeds, each page
     loaded, settled on `#ready`, its content and links read, new links queued in memory;
  2. one `shoal crawl --spider render` process crawls the same pages from the same seeds through
     Redis, its pages sent to Kafka, each settled on `attrs.wait_for = "#ready"`;
  3. with `--plain-fetch`, first one `shoal crawl --spider link` process fetches the pages plainly
     (all seeded, maxdepth 0: a plain fetch finds no link to follow on them).
Throughput is pages/s from the seeding (or the launch) to the last page, the browser's start
included on both sides; the target is render >= 0.9 x Playwright (issue 37). CPU per page is the
CPU time of the process, its Playwright driver and its browser (from /proc: user + system of the
live tree plus what it reaped). Every 0.5 s the bench samples the process's own RSS, its driver's
RSS and its browser's memory (PSS summed over the Chromium processes, as the render process
measures it to decide restarts): the browser's peak must stay under RENDER_BROWSER_MEMORY_MAX and
the render process under CRAWLER_RSS_MAX. `--pages 2000 --plain-fetch` is the long memory run.
`--profile DIR` records the render process with py-spy (speedscope, with its subprocesses);
`--variant RENDER_PAGES_PER_CONTEXT=100` (repeatable; KEY=VALUE,KEY=VALUE) adds a render crawl
with those settings to the same run, to weigh a setting by its ratio.
Writes bench/results/render.json.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import os
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

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
MAX_PAGES = 4  # RENDER_MAX_PAGES of the run (the default): pages open at once on both sides
CHROMIUM = "/usr/bin/chromium"
BROWSER_MEMORY_MAX = 768  # MiB; RENDER_BROWSER_MEMORY_MAX of the run (the default)
CRAWLER_RSS_MAX = 256  # MiB; the render process's own resident memory, browser excluded
TARGET = 0.9  # render pages/s over plain Playwright's (issue 37)
SHOAL = {"QUEUE_HITS": 0, "ZOOKEEPER_ENABLED": "false", "SCHEDULER_IDLE_POLL": 0.05, "SCHEDULER_FLUSH_INTERVAL": 0.05,
         "RENDER_BROWSER_MEMORY_MAX": BROWSER_MEMORY_MAX, "RENDER_MAX_PAGES": MAX_PAGES, "RENDER_STATS_INTERVAL": 1.0,
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
                                  crawlid=crawlid, **crawl_request.encode(record)._asdict(),
                                  fingerprint=fingerprint(url), seed=True))  # fmt: skip
    Frontier.from_settings(cluster.settings, redis_client(cluster.settings)).enqueue(entries)


def tree_cpu(pid: int) -> dict[str, float]:
    """CPU seconds of a process (`own`), its Playwright driver and its browser (the rest of its tree).

    Each live process counts with the children it has reaped: a browser closed on restart was
    reaped by the driver, so its time is in the driver's children figures (counted as browser);
    nothing is counted twice because a reaped process is not live.
    """
    split = {"own": 0.0, "driver": 0.0, "browser": 0.0}
    try:
        processes = [psutil.Process(pid), *psutil.Process(pid).children(recursive=True)]
    except psutil.Error:
        return split
    for process in processes:
        try:
            times, name = process.cpu_times(), process.name()
        except psutil.Error:
            continue
        kind = "own" if process.pid == pid else "driver" if name.startswith("node") else "browser"
        split[kind] += times.user + times.system
        split["browser"] += times.children_user + times.children_system
    return split


def cpu_per_page(before: dict[str, float], after: dict[str, float], pages: int) -> dict[str, float]:
    """Milliseconds of CPU per page: in all, and of the process, its driver and its browser."""
    spent = {kind: 1000 * (after[kind] - before[kind]) / max(pages, 1) for kind in after}
    return {"cpu_ms_per_page": round(sum(spent.values()), 1),
            **{f"cpu_ms_per_page_{kind}": round(ms, 1) for kind, ms in spent.items()}}  # fmt: skip


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

    def figures(self) -> dict[str, float]:
        self.stop_event.set()
        self.join()
        return {f"peak_{k}_mib": round(v / MIB, 1) for k, v in self.peak.items()}


def _rss(pid: int) -> int:
    try:
        return int(psutil.Process(pid).memory_info().rss)
    except psutil.Error:
        return 0


async def playwright_crawl(seeds: list[str], pages: int, depth: int) -> tuple[int, float, dict[str, float]]:
    """Plain Playwright as a user writes it: one browser and context, `pages` pages reused.

    Each page loads a URL, waits for `#ready`, reads the content and the links, and queues the
    links of the same host not seen before; returns the number of pages read, and the time and
    this process tree's CPU when the last was read (the browser still open, as the render
    process's is when it is measured).
    """
    from playwright.async_api import async_playwright

    from crawler.browser import CHROMIUM_ARGS  # the same Chromium command line as the render process

    queue: asyncio.Queue[tuple[str, int]] = asyncio.Queue()
    seen = set(seeds)
    for seed in seeds:
        queue.put_nowait((seed, 0))
    read = 0
    phases: dict[str, float] = {}  # seconds per phase, the render process's Phases' counterpart

    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(executable_path=CHROMIUM, args=list(CHROMIUM_ARGS))
        context = await browser.new_context()

        async def worker() -> None:
            nonlocal read
            page = await context.new_page()
            while True:
                url, level = await queue.get()
                try:
                    mark = time.monotonic()
                    await page.goto(url)
                    mark = _phase(phases, "goto", mark)
                    await page.wait_for_selector(READY_SELECTOR, state="attached")
                    mark = _phase(phases, "selector", mark)
                    html = await page.content()
                    mark = _phase(phases, "content", mark)
                    links = await page.eval_on_selector_all("a[href]", "found => found.map(a => a.href)")
                    _phase(phases, "links", mark)
                    read += len(html) > 0
                    for link in links:
                        if level < depth and link not in seen and urlsplit(link).netloc == urlsplit(url).netloc:
                            seen.add(link)
                            queue.put_nowait((link, level + 1))
                finally:
                    queue.task_done()  # after its links are queued; a failed page is missing from the count

        workers = [asyncio.create_task(worker()) for _ in range(pages)]
        await queue.join()
        finished, cpu = time.time(), tree_cpu(os.getpid())
        for task in workers:
            task.cancel()
        print("playwright: ms_per_page", {k: round(v * 1000 / max(read, 1), 1) for k, v in sorted(phases.items())})
        await browser.close()
    return read, finished, cpu


def _phase(phases: dict[str, float], name: str, since: float) -> float:
    now = time.monotonic()
    phases[name] = phases.get(name, 0.0) + now - since
    return now


def playwright_process(seeds: list[str], pages: int, answer: Any) -> None:
    """Run `playwright_crawl` and answer (pages, seconds, CPU figures of this process tree)."""
    cpu, started = tree_cpu(os.getpid()), time.time()
    done, finished, cpu_after = asyncio.run(playwright_crawl(seeds, pages, DEPTH))
    answer.put((done, finished - started, cpu_per_page(cpu, cpu_after, done)))


def run_playwright(seeds: list[str]) -> dict[str, Any]:
    """Plain Playwright's crawl of the scripted pages, in its own process, with its memory peaks."""
    spawn = multiprocessing.get_context("spawn")
    answer = spawn.Queue()
    process = spawn.Process(target=playwright_process, args=(seeds, MAX_PAGES, answer))
    process.start()
    assert process.pid is not None
    sampler = MemorySampler(process.pid)
    sampler.start()
    done, seconds, cpu = answer.get(timeout=1200)
    process.join(30)
    return {"pages": done, "failed": 0, "seconds": round(seconds, 1), "pages_per_s": round(done / seconds, 2),
            **cpu, **sampler.figures()}  # fmt: skip


def run_crawl(cluster: TestCluster, spider: str, crawlid: str, seed: Callable[[], None],
              profile: Path | None = None, settings: dict[str, str] | None = None) -> dict[str, Any]:  # fmt: skip
    """Start one crawler of `spider`, call `seed()`, and time it from the seeding to the last page."""
    env = cluster.env
    cluster.env = {**env, **{f"SHOAL_{k}": v for k, v in (settings or {}).items()}}
    try:
        crawler = cluster.start("crawl", "--spider", spider, name=crawlid)
    finally:
        cluster.env = env
    wait_until(lambda: "Scheduler opened" in crawler.log_path.read_text(), timeout=120)
    sampler = MemorySampler(crawler.pid)
    sampler.start()
    spy = _py_spy(crawler.pid, profile / f"{crawlid}.speedscope.json") if profile else None
    cpu, first = tree_cpu(crawler.pid), time.time()  # from the seeding: a plain crawl has no "first page"
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
    cpu = cpu_per_page(cpu, tree_cpu(crawler.pid), done)
    figures = {"pages": done, "failed": reading.count("failed") + reading.count("dead"),
               "seconds": round(last - first, 1), "pages_per_s": round(done / (last - first), 2),
               **cpu, **sampler.figures()}  # fmt: skip
    if spy is not None:
        spy.send_signal(2)  # py-spy writes its profile on SIGINT
        spy.wait(60)
    crawler.stop()
    phases = [line for line in crawler.log_path.read_text().splitlines() if "Render phases" in line]
    if phases:  # the render process's per-phase sums (crawler.render_stats.Phases), logged at close
        print(f"{crawlid}: {phases[-1]}")
    return figures


def _py_spy(pid: int, path: Path) -> subprocess.Popen[bytes]:
    path.parent.mkdir(parents=True, exist_ok=True)
    py_spy = Path(sys.executable).with_name("py-spy")
    return subprocess.Popen([str(py_spy), "record", "--pid", str(pid), "--subprocesses", "--idle",
                             "--rate", "200", "--format", "speedscope", "--output", str(path)])  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pages", type=int, default=300, help="scripted pages in all (4 hosts); 300 by default")
    parser.add_argument("--plain-fetch", action="store_true", help="also time the link spider's plain fetch")
    parser.add_argument("--profile", type=Path, help="record the render process with py-spy into this folder")
    parser.add_argument("--variant", action="append", default=[], help="KEY=VALUE,...: one more render crawl")
    args = parser.parse_args()
    pages_per_host = args.pages // HOSTS
    port = free_port()
    site = build_site(port, pages_per_host)
    urls = scripted_urls(site)
    seeds = scripted_seeds(site)
    assert len(urls) == HOSTS * pages_per_host
    assert reachable(site, seeds, DEPTH) == set(urls), "the seeds must reach every page"
    server = multiprocessing.get_context("spawn").Process(target=serve, args=(port, pages_per_host), daemon=True)
    server.start()
    load = os.getloadavg()
    try:
        with bench_cluster(**SHOAL) as cluster:
            plain = None
            if args.plain_fetch:
                plain = run_crawl(cluster, "link", "plain", lambda: enqueue(cluster, urls, "link", "plain"))
            playwright = run_playwright(seeds)
            rendered = run_crawl(cluster, "render", "rendered", lambda: enqueue(
                cluster, seeds, "render", "rendered", maxdepth=DEPTH, attrs={"wait_for": READY_SELECTOR}),
                args.profile)  # fmt: skip
            figures_log = _render_figures(cluster)
            variants = {}
            for n, variant in enumerate(args.variant):
                settings = dict(pair.split("=", 1) for pair in variant.split(","))
                variants[variant] = run_crawl(cluster, "render", f"variant{n}", lambda n=n: enqueue(
                    cluster, seeds, "render", f"variant{n}", maxdepth=DEPTH, attrs={"wait_for": READY_SELECTOR}),
                    settings=settings)  # fmt: skip
    finally:
        server.terminate()
        server.join(10)
    load = (*load, *os.getloadavg())
    ratio = round(rendered["pages_per_s"] / playwright["pages_per_s"], 3)
    figures = {"pages": len(urls), "max_pages": MAX_PAGES, **{f"playwright_{k}": v for k, v in playwright.items()},
               **{f"render_{k}": v for k, v in rendered.items()}, **figures_log, "render_vs_playwright": ratio,
               "cpu_per_page_vs_playwright": round(rendered["cpu_ms_per_page"] / playwright["cpu_ms_per_page"], 3),
               "loadavg_before_after": [round(x, 2) for x in load],
               "browser_memory_max_mib": BROWSER_MEMORY_MAX, "crawler_rss_max_mib": CRAWLER_RSS_MAX}  # fmt: skip
    if plain is not None:
        figures.update({f"plain_{k}": v for k, v in plain.items()})
    for variant, result in variants.items():
        result["vs_playwright"] = round(result["pages_per_s"] / playwright["pages_per_s"], 3)
        figures[f"variant {variant}"] = result
        print(f"variant {variant}: {result['pages_per_s']} pages/s = "
              f"{result['vs_playwright']}x; CPU per page {result['cpu_ms_per_page']} ms "
              f"({_split(result)})")  # fmt: skip
    checks = {
        "every page rendered, none failed": rendered["pages"] == len(urls) and rendered["failed"] == 0,
        "plain Playwright read every page": playwright["pages"] == len(urls),
        f"render >= {TARGET} x plain Playwright pages/s": ratio >= TARGET,
        f"browser peak <= {BROWSER_MEMORY_MAX} MiB": rendered["peak_browser_pss_mib"] <= BROWSER_MEMORY_MAX,
        f"render process RSS <= {CRAWLER_RSS_MAX} MiB": rendered["peak_crawler_rss_mib"] <= CRAWLER_RSS_MAX,  # noqa: E501
    }
    if plain is not None:
        checks["every page fetched plainly"] = plain["pages"] == len(urls)
    print(f"render: {rendered['pages']} pages at {rendered['pages_per_s']} pages/s vs plain Playwright "
          f"{playwright['pages_per_s']} pages/s = {ratio}x; CPU per page {rendered['cpu_ms_per_page']} ms vs "
          f"{playwright['cpu_ms_per_page']} ms (process + driver + browser: {_split(rendered)} vs {_split(playwright)})"
          + (f"; plain fetch {plain['pages_per_s']} pages/s" if plain else "") + "\n"
          f"peaks: render process {rendered['peak_crawler_rss_mib']} MiB, "
          f"browser {rendered['peak_browser_pss_mib']} MiB (bound {BROWSER_MEMORY_MAX}; Playwright's "
          f"{playwright['peak_browser_pss_mib']}), driver {rendered['peak_driver_rss_mib']} MiB; "
          f"browser restarts {figures_log.get('browser_restarts')}; load {list(load)}")  # fmt: skip
    print_checks(checks)
    path = write_result("render", figures, checks)
    print(f"written: {path}")
    return 0 if all(checks.values()) else 1


def _split(figures: dict[str, Any]) -> str:
    return " + ".join(str(figures[f"cpu_ms_per_page_{kind}"]) for kind in ("own", "driver", "browser"))


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
