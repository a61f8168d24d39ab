"""Crawl throughput and CPU per page, KB and link: plain single-process Scrapy vs one and two Shoal crawlers.

`.venv/bin/python -m bench.crawl_vs_scrapy` crawls the realistic site (utils/demosite/realistic.py:
4 hosts x 1,500 HTML pages of 10-100 KB, median ~30 KB, with 10-150 links, median ~50; 404s,
redirects, robots-disallowed pages, images and PDFs among them), written once under .shoal/sites and
served by Debian's nginx (`make bench` installs it), whose CPU per page is negligible. `--site demo`
crawls issue 37's demo site (2 KB pages, 5-12 links) from the asyncio server instead; `--pages N`
sets either site's pages per host (1,500). Each round crawls all of it, robots.txt obeyed, the same
link extractor, in turn:
  1. plain Scrapy at its own defaults (16 requests in flight, 8 per domain);
  2. plain Scrapy at Shoal's concurrency (16, 16 per domain): a Spider with a LinkExtractor, Scrapy's
     own scheduler and dupefilter, items yielded;
  3. one `shoal crawl` process at its defaults, throttle off (QUEUE_HITS=0): Redis frontier (leased
     pops, Lua dupefilter), page messages confirmed by the broker before each ack;
  4. two `shoal crawl` processes sharing the frontier.
`--wide` crawls issue 37's wide site instead (a hub page linking to 9,000 loopback hosts of 5 pages
each, utils/demosite/broad.py; `--hosts N` for fewer), plain Scrapy against one crawler only: there
Scrapy's per-domain download slots cost it dearly, and the check keeps Shoal's lead.
Throughput is pages/s between the first and the last page of each crawl (process start-up excluded).
Rounds (BENCH_ROUNDS, 3) are interleaved, since other load on the machine comes and goes: each figure
is the median of the rounds with its range, each ratio the median of the rounds' own ratios. Over the
same window the whole machine's busy CPU (/proc/stat) and each process's own CPU (/proc/<pid>/stat,
bench/node_cpu.py) are read: per page, the machine's figure is what the node pays (other load
included: note the load average printed with each round); the breakdown names each cost's owner
(crawlers, broker JVM, Redis, ZooKeeper; the site server and this bench process, the same work for
both sides, shown apart; "other" is what else ran), per page, per KB of body and per extracted link.
Shoal's seeds are written to Redis as the kafka monitor writes them (no monitor runs). Redis round
trips per page are counted by the crawler and cross-checked with Redis' INFO commandstats.
Prints a table and writes bench/results/crawl_vs_scrapy.json (_demo, _wide for the other sites).
Targets (issue 43, medians): one crawler >= 1.0x plain Scrapy at the same concurrency and >= 0.95x at
Scrapy's defaults; two >= 1.8x one; machine CPU per page <= 1.15x plain Scrapy's, the crawler
process alone <= 1.0x; wide: one crawler >= 1.9x plain Scrapy.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from bench import node_cpu
from bench.common import bench_cluster, write_result
from tests.support.cluster import TestCluster
from tests.support.kafka import TopicReader
from tests.support.services import wait_until
from utils.config.clients import redis_client
from utils.demosite import Site, SiteServer, generate_site
from utils.demosite.broad import HUB, broad_site
from utils.demosite.realistic import NginxSite, final_urls, realistic_site, shape_key, written_port
from utils.frontier import progress
from utils.frontier.progress import CrawlRef
from utils.services import free_port
from utils.services.process import port_in_use

DEMO: dict[str, Any] = {"hosts": 4, "pages_per_host": 1500, "seed": 17, "base_ip_octet": 170}  # issue 37's shape
REALISTIC: dict[str, Any] = {"hosts": 4, "seed": 43, "base_ip_octet": 180}  # realistic.py
REALISTIC_PAGES = 1500  # per host
WIDE_HOSTS, WIDE_PAGES = 9000, 5  # issue 37's wide site
CONCURRENCY = 16  # Shoal's defaults: 16 in flight per crawler, 16 per domain
SCRAPY_DEFAULT_PER_DOMAIN = 8  # Scrapy's own CONCURRENT_REQUESTS_PER_DOMAIN (its CONCURRENT_REQUESTS is 16 too)
SHOAL = {"QUEUE_HITS": 0, "CONCURRENT_REQUESTS": CONCURRENCY, "CONCURRENT_REQUESTS_PER_DOMAIN": CONCURRENCY,
         "ZOOKEEPER_ENABLED": "false", "SCHEDULER_IDLE_POLL": 0.05, "SCHEDULER_FLUSH_INTERVAL": 0.05}  # fmt: skip
ROUNDS = int(os.environ.get("BENCH_ROUNDS", "3"))
DEPTH = 100  # the schema's most; the demo site is 6 links deep
SHARED = ("site server", "bench")  # the same work whoever crawls: shown apart
SITES = Path(__file__).resolve().parents[1] / ".shoal" / "sites"  # the realistic site's files, kept between runs
KINDS = ("plain", "plain_same", "one", "two")
NAMES = {"plain": "Scrapy, its defaults", "plain_same": "Scrapy, Shoal's conc.", "one": "Shoal, 1 crawler",
         "two": "Shoal, 2 crawlers"}  # fmt: skip


def build_site(shape: dict[str, Any]) -> Site:
    """The realistic site (its files written once under .shoal/sites), the demo site or the wide one."""
    if shape["site"] == "wide":
        return broad_site(shape["wide_hosts"], shape["wide_pages"], shape["port"])
    if shape["site"] == "realistic":
        return realistic_site(realistic_dir(shape), pages_per_host=shape["pages"], port=shape["port"], **REALISTIC)
    return generate_site(port=shape["port"], **{**DEMO, "pages_per_host": shape["pages"]})


def realistic_dir(shape: dict[str, Any]) -> Path:
    return SITES / f"realistic-{shape_key(**REALISTIC, pages=shape['pages'])}"


def site_port(site_kind: str, pages: int) -> int:
    """A free port: for the realistic site, the one its kept files were written for when it is free
    on every host's address (another port rewrites them, as their links between hosts name it)."""
    if site_kind == "realistic":
        port = written_port(realistic_dir({"pages": pages}))
        addresses = [f"127.0.0.{REALISTIC['base_ip_octet'] + i}" for i in range(REALISTIC["hosts"])]
        if port and not any(port_in_use(address, port) for address in addresses):
            return port
    return free_port()


def seeds_and_depth(shape: dict[str, Any], site: Site) -> tuple[list[str], int]:
    if shape["site"] == "wide":
        return [f"http://{HUB}:{shape['port']}/"], 2
    return site.seed_urls(), DEPTH


def serve(shape: dict[str, Any]) -> None:
    """The site server's own process: the crawlers' CPU is not shared with it through the GIL."""
    asyncio.run(SiteServer(build_site(shape)).serve_forever())


def page_weights(shape: dict[str, Any], site: Site, urls: set[str]) -> tuple[float, float]:
    """Mean KB of body and mean links per answered page of the crawl (for CPU per KB and per link)."""
    if shape["site"] == "realistic":
        directory = realistic_dir(shape)
        sizes = []
        for url in urls:
            parts = urlsplit(url)
            file = directory / (parts.hostname or "") / (parts.path.lstrip("/") or "index.html")
            sizes.append(file.stat().st_size if file.is_file() else 150)  # nginx's 404 page
    else:
        sizes = [len(page.body) if (page := site.pages.get(url)) else 150 for url in urls]
    links = [len(page.links) if (page := site.pages.get(url)) else 0 for url in urls]
    return sum(sizes) / 1024 / len(urls), sum(links) / len(urls)


def plain_scrapy(shape: dict[str, Any], expected: int, out: str) -> None:
    """Run in a subprocess: crawl the whole site with plain Scrapy; write its item times and the
    /proc snapshots taken at its first and its `expected`-th page."""
    from scrapy import Request, Spider, signals
    from scrapy.crawler import CrawlerProcess
    from scrapy.http import TextResponse
    from scrapy.linkextractors import LinkExtractor

    times: list[float] = []
    urls: list[str] = []
    cpu: list[float] = []
    snapshots: list[node_cpu.Snapshot] = []

    class PlainSpider(Spider):
        name = "plain"
        start_urls = shape["seeds"]
        extractor = LinkExtractor(deny_extensions=[])

        def parse(self, response: Any, **_: Any) -> Any:
            item: dict[str, Any] = {"url": response.url, "status": response.status, "links": []}
            if isinstance(response, TextResponse):
                item["body"] = response.text
                for link in self.extractor.extract_links(response):
                    item["links"].append({"url": link.url, "text": link.text.strip()})
                    yield Request(link.url, callback=self.parse)
            yield item

    def scraped(item: dict[str, Any], **_: Any) -> None:
        times.append(time.time())
        urls.append(item["url"])
        if len(times) == 1 or len(times) == expected:
            snapshots.append(node_cpu.take())
        if len(times) == 1:
            cpu.append(time.process_time())
        cpu[1:] = [time.process_time()]

    concurrency = {"CONCURRENT_REQUESTS": CONCURRENCY, "CONCURRENT_REQUESTS_PER_DOMAIN": CONCURRENCY}
    process = CrawlerProcess({
        **({"CONCURRENT_ITEMS": shape["plain_items"]} if shape["plain_items"] else {}),
        **(concurrency if shape["same_concurrency"] else {}), "ROBOTSTXT_OBEY": True,
        "HTTPERROR_ALLOW_ALL": True, "LOG_LEVEL": "WARNING", "TELNETCONSOLE_ENABLED": False, "DOWNLOAD_TIMEOUT": 10,
        "USER_AGENT": "Shoal/0.1 (+https://github.com/shoal-crawler/shoal)", "REACTOR_THREADPOOL_MAXSIZE": 4,
    })  # fmt: skip

    def closed(**_: Any) -> None:  # fewer pages than expected: the window ends here (the URL check fails)
        if len(snapshots) == 1:
            snapshots.append(node_cpu.take())

    crawler = process.create_crawler(PlainSpider)
    crawler.signals.connect(scraped, signal=signals.item_scraped)
    crawler.signals.connect(closed, signal=signals.spider_closed)
    process.crawl(crawler)
    process.start()
    windows = [{"busy": s.busy, "processes": list(s.processes.items())} for s in snapshots]
    Path(out).write_text(json.dumps({"times": times, "urls": urls, "cpu": cpu[-1] - cpu[0], "windows": windows,
                                     "pid": os.getpid()}))  # fmt: skip


def _snapshot(raw: dict[str, Any]) -> node_cpu.Snapshot:
    return node_cpu.Snapshot(raw["busy"], {int(pid): (t, p) for pid, (t, p) in raw["processes"]})


def run_plain(
    shape: dict[str, Any], expected: set[str], roots: dict[int, str], same_concurrency: bool
) -> dict[str, Any]:
    plain = {**shape, "same_concurrency": same_concurrency}
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        subprocess.run([sys.executable, "-m", "bench.crawl_vs_scrapy", "--plain-scrapy", json.dumps(plain),
                        str(len(expected)), out.name], check=True)  # fmt: skip
        result = json.loads(Path(out.name).read_text())
    assert set(result["urls"]) == expected, "plain Scrapy did not crawl the expected pages"
    times = result["times"]
    seconds = times[-1] - times[0]
    start, end = (_snapshot(w) for w in result["windows"])
    cpu = node_cpu.breakdown(start, end, {**roots, result["pid"]: "plain Scrapy"})
    return {"pages": len(times), "seconds": seconds, "pages_per_s": (len(times) - 1) / seconds,
            "cpu_ms_per_page": 1000 * result["cpu"] / (len(times) - 1), **per_page(cpu, len(times) - 1)}  # fmt: skip


def per_page(cpu: dict[str, float], pages: int) -> dict[str, Any]:
    """The machine's, the crawl's own (every owner but the shared ones and other load) and each
    owner's CPU ms per page."""
    apart = {*SHARED, node_cpu.OTHER, node_cpu.UNATTRIBUTED, "machine"}
    node = sum(v for k, v in cpu.items() if k not in apart)
    return {"machine_cpu_ms_per_page": 1000 * cpu["machine"] / pages, "node_cpu_ms_per_page": 1000 * node / pages,
            "cpu_ms_per_page_by_owner": {k: round(1000 * v / pages, 3) for k, v in sorted(cpu.items())}}  # fmt: skip


def run_shoal(
    cluster: TestCluster, shape: dict[str, Any], site: Site, processes: int, crawlid: str, roots: dict[int, str],
    fields: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """One crawl of the site by `processes` crawlers; `fields`: more crawl request fields (e.g. `extract`)."""
    from tests.e2e.test_crawler_helpers import seed

    crawlers = [cluster.start("crawl", "--spider", "link", name=f"{crawlid}-{i}") for i in range(processes)]
    wait_until(lambda: all("Scheduler opened" in c.log_path.read_text() for c in crawlers), timeout=60)
    client = redis_client(cluster.settings)
    evalsha_before = _evalsha_calls(client)
    seeds, depth = seeds_and_depth(shape, site)
    for url in seeds:
        seed(cluster, url, crawlid=crawlid, maxdepth=depth, deny_extensions=[], **(fields or {}))
    first = last = 0.0
    cpu_start = 0.0
    window: list[node_cpu.Snapshot] = []
    crawl = CrawlRef("link", "testapp", crawlid)  # seed()'s appid
    while True:  # one client for every poll: a new one each time cost ~4 % of a core, taken from the crawlers
        reading = progress.read(client, crawl)
        crawled = reading.count("crawled") if reading else 0
        now = time.time()
        if not first and crawled:
            first = now
            window.append(node_cpu.take())
            cpu_start = sum(_cpu_seconds(c.pid) for c in crawlers)
        if crawled and reading is not None and not reading.pending:
            last = now
            window.append(node_cpu.take())
            break
        time.sleep(0.05)
    pages = crawled
    cpu = sum(_cpu_seconds(c.pid) for c in crawlers) - cpu_start
    evalsha = _evalsha_calls(client) - evalsha_before
    owners = {**roots, **{c.pid: "crawlers" for c in crawlers}}
    for crawler in crawlers:
        crawler.stop()
    trips = sum(_round_trips(crawler.log_path) for crawler in crawlers)
    return {"pages": pages, "seconds": last - first, "pages_per_s": (pages - 1) / (last - first),
            "round_trips_per_page": trips / pages, "evalsha_per_page": evalsha / pages,
            "cpu_ms_per_page": 1000 * cpu / (pages - 1),
            **per_page(node_cpu.breakdown(window[0], window[1], owners), pages - 1)}  # fmt: skip


def _cpu_seconds(pid: int) -> float:
    """User + system CPU of a process (from /proc), to compare work per page whatever else runs."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _evalsha_calls(client: Any) -> int:
    return int(client.info("commandstats").get("cmdstat_evalsha", {}).get("calls", 0))


def _round_trips(log_path: Path) -> int:
    """The crawler's own count of its Redis round trips, from its "Scheduler closed" log line."""
    trips = {}
    for line in log_path.read_text().splitlines():
        if '"Scheduler closed"' in line or '"Crawler stats closed"' in line:
            entry = json.loads(line)
            trips[entry["message"]] = int(entry.get("round_trips", 0)) + int(entry.get("stats_flushes", 0))
    assert len(trips) == 2, f"no closing counts in {log_path}"
    return sum(trips.values())


def check_firehose(cluster: TestCluster, expected: set[str], crawlids: list[str]) -> str:
    """What is wrong with the firehose ('' when every page of every Shoal run is on it, each once)."""
    reader = TopicReader(cluster.settings.get_list("KAFKA_HOSTS")[0], cluster.settings.topic("crawled_firehose"))
    total = len(expected) * len(crawlids)
    ours = set(crawlids)
    try:
        reader.wait_for(lambda got: sum(1 for m in got if m.get("crawlid") in ours) >= total, timeout=300)
    except AssertionError:
        pass  # counted below
    finally:
        reader.close()
    for crawlid in crawlids:
        got = Counter(m["url"] for m in reader.messages if m["crawlid"] == crawlid)
        missing = sorted(expected - set(got))
        twice = sorted(url for url, n in got.items() if n > 1)
        extra = sorted(set(got) - expected)
        if missing or twice or extra:
            return (f"{crawlid}: the firehose does not hold each page once: {len(missing)} missing {missing[:3]}, "
                    f"{len(twice)} more than once {twice[:3]}, {len(extra)} unexpected {extra[:3]}")  # fmt: skip
    return ""


def service_roots(cluster: TestCluster, server_pid: int) -> dict[int, str]:
    services = cluster.services
    roots = {os.getpid(): "bench", server_pid: "site server", services.redis.pid: "redis",
             services.zookeeper.pid: "zookeeper", services.broker.pid: "broker (JVM)"}  # fmt: skip
    return {pid: name for pid, name in roots.items() if pid is not None}


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))  # the wide site: one listening socket per host
    site_kind = "wide" if args.wide else args.site
    port = site_port(site_kind, args.pages)
    shape: dict[str, Any] = {"port": port, "site": site_kind, "wide_hosts": args.hosts, "wide_pages": WIDE_PAGES,
                             "pages": args.pages, "plain_items": args.plain_items}  # fmt: skip
    site = build_site(shape)
    seeds, depth = seeds_and_depth(shape, site)
    shape["seeds"] = seeds
    expected = final_urls(site, site.reachable(seeds, depth, obey_robots=True))
    kb, links = page_weights(shape, site, expected)
    kinds: tuple[str, ...] = ("plain", "plain_same", "one") if args.wide else KINDS
    kinds = tuple(k for k in kinds if k in args.only.split(",")) if args.only else kinds
    runs: dict[str, list[dict[str, Any]]] = {kind: [] for kind in kinds}
    loads = []
    with tempfile.TemporaryDirectory(prefix="shoal-site-") as run_dir:
        server, server_pid = start_server(shape, site, Path(run_dir))
        try:
            with bench_cluster(**{**SHOAL, **dict(pair.split("=", 1) for pair in args.set)}) as cluster:
                roots = service_roots(cluster, server_pid)
                for round_ in range(ROUNDS):  # interleaved: other load on the machine comes and goes
                    for kind in kinds:
                        loads.append(Path("/proc/loadavg").read_text().split()[0])
                        if kind.startswith("plain"):
                            run = run_plain(shape, expected, roots, same_concurrency=kind == "plain_same")
                        else:
                            crawlid = f"{kind}{round_}-{shape['port']}"  # this run's alone, whatever the topic holds
                            run = run_shoal(cluster, shape, site, 1 if kind == "one" else 2, crawlid, roots)
                        runs[kind].append({**run, "load": float(loads[-1])})
                        print(
                            f"round {round_ + 1} {NAMES[kind]}: {run['pages_per_s']:.1f} pages/s, "
                            f"{run['cpu_ms_per_page']:.2f} crawler ms/page, "
                            f"{run['machine_cpu_ms_per_page']:.2f} machine ms/page, load {loads[-1]}",
                            flush=True,
                        )
                crawlids = [
                    f"{n}{r}-{shape['port']}" for r in range(ROUNDS) for n in kinds if not n.startswith("plain")
                ]
                problem = check_firehose(cluster, expected, crawlids) if crawlids else ""
        finally:
            server.stop()
    weights = {"kb_per_page": kb, "links_per_page": links}
    figures, checks = summarise(runs, len(expected), site_kind, loads, weights)
    checks["firehose_holds_each_page_once"] = not problem
    print_table(figures, checks)
    if problem:
        print(problem)
    if args.only:  # a partial run: its rows, no file
        return 0
    name = {"wide": "crawl_vs_scrapy_wide", "demo": "crawl_vs_scrapy_demo"}.get(site_kind, "crawl_vs_scrapy")
    print(f"written {write_result(name, figures, checks)}")
    return 0


class _ProcessServer:
    """The demo and wide sites' own asyncio server, in a process of its own."""

    def __init__(self, shape: dict[str, Any]) -> None:
        self.process = multiprocessing.Process(target=serve, args=(shape,), daemon=True)

    def start(self, host: str, port: int) -> int:
        self.process.start()
        wait_until(lambda: port_in_use(host, port), timeout=120)
        return self.process.pid or 0

    def stop(self) -> None:
        self.process.terminate()


def start_server(shape: dict[str, Any], site: Site, run_dir: Path) -> tuple[NginxSite | _ProcessServer, int]:
    """nginx for the realistic site (its CPU per request negligible), the asyncio server otherwise."""
    if shape["site"] == "realistic":
        nginx = NginxSite(realistic_dir(shape), site, run_dir / "nginx")
        return nginx, nginx.start()
    server = _ProcessServer(shape)
    return server, server.start(site.hosts[-1].rsplit(":", 1)[0], shape["port"])


def spread(values: list[float]) -> dict[str, float]:
    """Median and range of one figure over the rounds."""
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def summarise(
    runs: dict[str, list[dict[str, Any]]], pages: int, site: str, loads: list[str], weights: dict[str, float]
) -> tuple[dict[str, Any], dict[str, bool]]:
    """Medians and ranges over the rounds; ratios per round (each pair ran side by side), then their median."""
    kb, links = weights["kb_per_page"], weights["links_per_page"]
    figures: dict[str, Any] = {"site": site, "site_pages": pages, "concurrency": CONCURRENCY, "rounds": ROUNDS,
                               "load_averages": loads, **weights, "runs": runs}  # fmt: skip
    for kind, rows in runs.items():
        owners = {owner for row in rows for owner in row["cpu_ms_per_page_by_owner"]}
        by_owner = {o: statistics.median(r["cpu_ms_per_page_by_owner"].get(o, 0.0) for r in rows) for o in owners}
        figures[kind] = {
            "pages_per_s": spread([r["pages_per_s"] for r in rows]),
            "machine_cpu_ms_per_page": spread([r["machine_cpu_ms_per_page"] for r in rows]),
            "node_cpu_ms_per_page": spread([r["node_cpu_ms_per_page"] for r in rows]),
            "crawler_cpu_ms_per_page": spread([r["cpu_ms_per_page"] for r in rows]),
            "cpu_ms_per_page_by_owner": by_owner,
            "cpu_ms_per_kb_by_owner": {o: v / kb for o, v in by_owner.items()},
            "cpu_us_per_link_by_owner": {o: 1000 * v / links for o, v in by_owner.items() if links},
        }

    def ratio(a: str, b: str, key: str) -> dict[str, float] | None:
        if a not in runs or b not in runs:
            return None
        return spread([x[key] / y[key] for x, y in zip(runs[a], runs[b], strict=True)])

    pairs = {"one_vs_plain_same_pages_per_s": ("one", "plain_same", "pages_per_s"),
             "one_vs_plain_pages_per_s": ("one", "plain", "pages_per_s"),
             "two_vs_one_pages_per_s": ("two", "one", "pages_per_s"),
             "one_vs_plain_same_machine_cpu": ("one", "plain_same", "machine_cpu_ms_per_page"),
             "one_vs_plain_same_crawler_cpu": ("one", "plain_same", "cpu_ms_per_page")}  # fmt: skip
    ratios = {name: r for name, (a, b, key) in pairs.items() if (r := ratio(a, b, key))}
    figures["ratios"] = ratios
    targets = {"one_vs_plain_same_pages_per_s": (">=", 1.0), "one_vs_plain_pages_per_s": (">=", 0.95),
               "two_vs_one_pages_per_s": (">=", 1.8), "one_vs_plain_same_machine_cpu": ("<=", 1.15),
               "one_vs_plain_same_crawler_cpu": ("<=", 1.0)}  # fmt: skip
    if site == "wide":
        targets = {"one_vs_plain_same_pages_per_s": (">=", 1.9)}
    checks = {f"{name} {op} {bound}": (ratios[name]["median"] >= bound if op == ">=" else
                                         ratios[name]["median"] <= bound)
              for name, (op, bound) in targets.items() if name in ratios}  # fmt: skip
    return figures, checks


def print_table(figures: dict[str, Any], checks: dict[str, bool]) -> None:
    print(f"\n{figures['site']} site: {figures['site_pages']} pages, {figures['kb_per_page']:.1f} KB and "
          f"{figures['links_per_page']:.1f} links per page, throttle off, median [min-max] of {figures['rounds']} "
          f"interleaved rounds, load averages {' '.join(figures['load_averages'])}")  # fmt: skip
    print(f"{'crawler':<24}{'pages/s':>24}{'crawler ms/page':>24}{'machine ms/page':>24}")
    kinds = [kind for kind in KINDS if kind in figures]

    def cell(value: dict[str, float]) -> str:
        return f"{value['median']:.2f} [{value['min']:.2f}-{value['max']:.2f}]"

    for kind in kinds:
        row = figures[kind]
        print(f"{NAMES[kind]:<24}{cell(row['pages_per_s']):>24}{cell(row['crawler_cpu_ms_per_page']):>24}"
              f"{cell(row['machine_cpu_ms_per_page']):>24}")  # fmt: skip
    print("CPU by owner (median): ms per page / ms per KB / us per link")
    for kind in kinds:
        row = figures[kind]
        owners = sorted(row["cpu_ms_per_page_by_owner"].items(), key=lambda kv: -kv[1])
        per_kb, per_link = row["cpu_ms_per_kb_by_owner"], row["cpu_us_per_link_by_owner"]
        cells = [
            f"{owner} {ms:.2f}/{per_kb[owner]:.3f}/{per_link.get(owner, 0.0):.0f}" for owner, ms in owners if ms >= 0.01
        ]
        print(f"  {NAMES[kind]:<24}" + ", ".join(cells))
    for name, value in figures["ratios"].items():
        print(f"  {name}: {cell(value)}")
    print("targets (medians): " + ", ".join(f"{name} {'OK' if ok else 'MISSED'}" for name, ok in checks.items()))


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="bench.crawl_vs_scrapy")
    parser.add_argument(
        "--site",
        choices=("realistic", "demo"),
        default="realistic",
        help="realistic: 4 hosts of "
        "10-100 KB pages with 10-150 links served by nginx (the default); demo: issue 37's 2 KB pages",
    )
    parser.add_argument("--pages", type=int, default=REALISTIC_PAGES, help="pages per host of either site")
    parser.add_argument("--wide", action="store_true", help="the wide site: a hub and HOSTS hosts of 5 pages")
    parser.add_argument("--hosts", type=int, default=WIDE_HOSTS, help="hosts of the wide site (9,000)")
    parser.add_argument("--plain-items", type=int, default=0, help="CONCURRENT_ITEMS of plain Scrapy "
                        "(its default, 100, unless set; Shoal's is 16)")  # fmt: skip
    parser.add_argument("--only", default="", help="comma-separated runs of plain, plain_same, one, two (no file)")
    parser.add_argument("--set", action="append", default=[], metavar="NAME=VALUE", help="a Shoal setting, e.g. "
                        "KAFKA_PRODUCER_COMPRESSION=zstd, for every Shoal crawler of the run")  # fmt: skip
    return parser.parse_args(argv)


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == "--plain-scrapy":
        plain_scrapy(json.loads(sys.argv[2]), int(sys.argv[3]), sys.argv[4])
        sys.exit(0)
    sys.exit(main())
