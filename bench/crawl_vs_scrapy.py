"""Crawl throughput and whole-node CPU: plain single-process Scrapy vs one and two Shoal crawlers (issues 4, 37).

`.venv/bin/python -m bench.crawl_vs_scrapy` generates issue 37's demo site (4 hosts x 1,500 pages),
serves it from a separate process, and crawls all of it in one run, with the same concurrency,
robots.txt obeyed, the same link extractor and the throttle off (QUEUE_HITS=0):
  1. plain Scrapy: a Spider with a LinkExtractor, Scrapy's own scheduler and dupefilter, items yielded;
  2. one `shoal crawl` process: Redis frontier (leased pops, Lua dupefilter), page messages confirmed
     by the broker before each ack;
  3. two `shoal crawl` processes sharing the frontier.
`--wide` crawls issue 37's wide site instead (a hub page linking to 9,000 loopback hosts of 5 pages
each, utils/demosite/broad.py; `--hosts N` for fewer), plain Scrapy against one crawler only: there
Scrapy's per-domain download slots cost it dearly, and the check keeps Shoal's lead.
Throughput is pages/s between the first and the last page of each crawl (process start-up excluded),
best of BENCH_ROUNDS (2) interleaved rounds. Over the same window the whole machine's busy CPU
(/proc/stat) and each process's own CPU (/proc/<pid>/stat, bench/node_cpu.py) are read: per page,
the machine's figure is what the node pays (other load included: note the load average); the
breakdown names each cost's owner (crawlers, broker JVM, Redis, ZooKeeper; the site server and this
bench process, the same work for both sides, shown apart; "other" is what else ran).
Shoal's seeds are written to Redis as the kafka monitor writes them (no monitor runs). Redis round
trips per page are counted by the crawler and cross-checked with Redis' INFO commandstats.
Prints a table and writes bench/results/crawl_vs_scrapy.json (crawl_vs_scrapy_wide.json with --wide).
Targets (issue 37): whole-machine CPU per page <= 1.15x plain Scrapy's; one crawler >= 0.95x plain
Scrapy; two >= 1.7x one; wide: one crawler >= 1.9x plain Scrapy (2.04x when issue 37 was opened).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import resource
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from bench import node_cpu
from bench.common import bench_cluster, write_result
from tests.support.cluster import TestCluster
from tests.support.kafka import TopicReader
from tests.support.services import wait_until
from utils.config.clients import redis_client
from utils.demosite import Site, SiteServer, generate_site
from utils.demosite.broad import HUB, broad_site
from utils.frontier import progress
from utils.frontier.progress import CrawlRef
from utils.services import free_port
from utils.services.process import port_in_use

DEMO = {"hosts": 4, "pages_per_host": 1500, "seed": 17, "base_ip_octet": 170}  # issue 37's shape
WIDE_HOSTS, WIDE_PAGES = 9000, 5  # issue 37's wide site
CONCURRENCY = 16
SHOAL = {"QUEUE_HITS": 0, "CONCURRENT_REQUESTS": CONCURRENCY, "CONCURRENT_REQUESTS_PER_DOMAIN": CONCURRENCY,
         "ZOOKEEPER_ENABLED": "false", "SCHEDULER_IDLE_POLL": 0.05, "SCHEDULER_FLUSH_INTERVAL": 0.05}  # fmt: skip
ROUNDS = int(os.environ.get("BENCH_ROUNDS", "2"))
DEPTH = 100  # the schema's most; the demo site is 6 links deep
SHARED = ("site server", "bench")  # the same work whoever crawls: shown apart


def build_site(shape: dict[str, Any]) -> Site:
    """The demo site, or the wide one (`wide_hosts` > 0)."""
    if shape["wide_hosts"]:
        return broad_site(shape["wide_hosts"], shape["wide_pages"], shape["port"])
    return generate_site(port=shape["port"], **DEMO)


def seeds_and_depth(shape: dict[str, Any], site: Site) -> tuple[list[str], int]:
    if shape["wide_hosts"]:
        return [f"http://{HUB}:{shape['port']}/"], 2
    return site.seed_urls(), DEPTH


def serve(shape: dict[str, Any]) -> None:
    """The site server's own process: the crawlers' CPU is not shared with it through the GIL."""
    asyncio.run(SiteServer(build_site(shape)).serve_forever())


def plain_scrapy(shape: dict[str, Any], expected: int, out: str) -> None:
    """Run in a subprocess: crawl the whole site with plain Scrapy; write its item times and the
    /proc snapshots taken at its first and its `expected`-th page."""
    from scrapy import Request, Spider, signals
    from scrapy.crawler import CrawlerProcess
    from scrapy.http import TextResponse
    from scrapy.linkextractors import LinkExtractor

    site = build_site(shape)
    times: list[float] = []
    urls: list[str] = []
    cpu: list[float] = []
    snapshots: list[node_cpu.Snapshot] = []

    class PlainSpider(Spider):
        name = "plain"
        start_urls = seeds_and_depth(shape, site)[0]
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

    process = CrawlerProcess({
        **({"CONCURRENT_ITEMS": shape["plain_items"]} if shape["plain_items"] else {}),
        "CONCURRENT_REQUESTS": CONCURRENCY, "CONCURRENT_REQUESTS_PER_DOMAIN": CONCURRENCY, "ROBOTSTXT_OBEY": True,
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


def run_plain(shape: dict[str, Any], expected: set[str], roots: dict[int, str]) -> dict[str, Any]:
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        subprocess.run([sys.executable, "-m", "bench.crawl_vs_scrapy", "--plain-scrapy", json.dumps(shape),
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


def check_firehose(cluster: TestCluster, expected: set[str], crawlids: list[str]) -> None:
    """Every page of every Shoal run is on the firehose, each once."""
    reader = TopicReader(cluster.settings.get_list("KAFKA_HOSTS")[0], cluster.settings.topic("crawled_firehose"))
    total = len(expected) * len(crawlids)
    reader.wait_for(lambda got: len(got) >= total, timeout=300)
    reader.close()
    for crawlid in crawlids:
        got = Counter(m["url"] for m in reader.messages if m["crawlid"] == crawlid)
        missing = sorted(expected - set(got))
        twice = sorted(url for url, n in got.items() if n > 1)
        extra = sorted(set(got) - expected)
        if missing or twice or extra:
            raise AssertionError(
                f"{crawlid}: the firehose does not hold each page once: {len(missing)} missing {missing[:3]}, "
                f"{len(twice)} more than once {twice[:3]}, {len(extra)} unexpected {extra[:3]}"
            )


def service_roots(cluster: TestCluster, server_pid: int) -> dict[int, str]:
    services = cluster.services
    roots = {os.getpid(): "bench", server_pid: "site server", services.redis.pid: "redis",
             services.zookeeper.pid: "zookeeper", services.broker.pid: "broker (JVM)"}  # fmt: skip
    return {pid: name for pid, name in roots.items() if pid is not None}


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))  # the wide site: one listening socket per host
    shape = {
        "port": free_port(),
        "wide_hosts": args.hosts if args.wide else 0,
        "wide_pages": WIDE_PAGES,
        "plain_items": args.plain_items,
    }
    server = multiprocessing.Process(target=serve, args=(shape,), daemon=True)
    server.start()
    site = build_site(shape)
    seeds, depth = seeds_and_depth(shape, site)
    host = site.hosts[-1].rsplit(":", 1)[0]
    wait_until(lambda: port_in_use(host, shape["port"]), timeout=120)
    expected = set(site.reachable(seeds, depth, obey_robots=True))
    kinds = ("plain", "one") if args.wide else ("plain", "one", "two")
    kinds = tuple(k for k in kinds if k in args.only.split(",")) if args.only else kinds
    runs: dict[str, list[dict[str, Any]]] = {kind: [] for kind in kinds}
    loads = []
    try:
        with bench_cluster(**{**SHOAL, **dict(pair.split("=", 1) for pair in args.set)}) as cluster:
            roots = service_roots(cluster, server.pid or 0)
            for round_ in range(ROUNDS):  # interleaved, best of each: other load on the machine comes and goes
                loads.append(Path("/proc/loadavg").read_text().split()[0])
                if "plain" in runs:
                    runs["plain"].append(run_plain(shape, expected, roots))
                if "one" in runs:
                    runs["one"].append(run_shoal(cluster, shape, site, 1, f"one{round_}", roots))
                if "two" in runs:
                    runs["two"].append(run_shoal(cluster, shape, site, 2, f"two{round_}", roots))
            loads.append(Path("/proc/loadavg").read_text().split()[0])
            check_firehose(cluster, expected, [f"{n}{r}" for r in range(ROUNDS) for n in kinds if n != "plain"])
    finally:
        server.terminate()
    best = {kind: max(runs[kind], key=lambda r: r["pages_per_s"]) for kind in kinds}
    if len(kinds) < 3 and not (args.wide and len(kinds) == 2):  # a partial run: its rows, no ratios
        print(json.dumps({"loads": loads, "settings": args.set, **best}, indent=1))
        return 0
    figures, checks = summarise(best, len(expected), args.wide, loads)
    print_table(figures, checks)
    print(f"written {write_result('crawl_vs_scrapy_wide' if args.wide else 'crawl_vs_scrapy', figures, checks)}")
    return 0


def summarise(
    best: dict[str, dict[str, Any]], pages: int, wide: bool, loads: list[str]
) -> tuple[dict[str, Any], dict[str, bool]]:
    plain, one = best["plain"], best["one"]
    figures: dict[str, Any] = {
        "site": "wide: hub + hosts x 5 pages" if wide else "4 hosts x 1,500 pages", "site_pages": pages,
        "concurrency": CONCURRENCY, "rounds": ROUNDS, "load_averages": loads, "plain_scrapy": plain,
        "shoal_1_process": one, "ratio_shoal_vs_scrapy": one["pages_per_s"] / plain["pages_per_s"],
        "ratio_machine_cpu_per_page": one["machine_cpu_ms_per_page"] / plain["machine_cpu_ms_per_page"],
        "ratio_node_cpu_per_page": one["node_cpu_ms_per_page"] / plain["node_cpu_ms_per_page"],
    }  # fmt: skip
    if wide:
        return figures, {"wide_shoal_ge_1.9x_scrapy": figures["ratio_shoal_vs_scrapy"] >= 1.9}
    two = figures["shoal_2_processes"] = best["two"]
    figures["ratio_2_vs_1"] = two["pages_per_s"] / one["pages_per_s"]
    checks = {"machine_cpu_le_1.15x_scrapy": figures["ratio_machine_cpu_per_page"] <= 1.15,
              "shoal_ge_0.95x_scrapy": figures["ratio_shoal_vs_scrapy"] >= 0.95,
              "two_ge_1.7x_one": figures["ratio_2_vs_1"] >= 1.7,
              "round_trips_le_3_per_page": max(one["round_trips_per_page"], two["round_trips_per_page"]) <= 3,
              }  # fmt: skip
    return figures, checks


def print_table(figures: dict[str, Any], checks: dict[str, bool]) -> None:
    print(f"\n{figures['site']}: {figures['site_pages']} pages, concurrency {figures['concurrency']}, throttle off, "
          f"load averages {' '.join(figures['load_averages'])}")  # fmt: skip
    rows = [(name, key) for name, key in (("plain Scrapy", "plain_scrapy"), ("Shoal, 1 process", "shoal_1_process"),
                                          ("Shoal, 2 processes", "shoal_2_processes")) if key in figures]  # fmt: skip
    head = f"{'crawler':<20}{'pages':>7}{'seconds':>9}{'pages/s':>9}{'crawler ms':>11}{'node ms':>9}{'machine ms':>11}"
    print(f"{head}{'RTT/page':>10}{'EVALSHA/page':>14}")
    for name, key in rows:
        row = figures[key]
        trips = f"{row['round_trips_per_page']:.3f}" if "round_trips_per_page" in row else "-"
        evals = f"{row['evalsha_per_page']:.3f}" if "evalsha_per_page" in row else "-"
        print(f"{name:<20}{row['pages']:>7}{row['seconds']:>9.2f}{row['pages_per_s']:>9.1f}"
              f"{row['cpu_ms_per_page']:>11.2f}{row['node_cpu_ms_per_page']:>9.2f}{row['machine_cpu_ms_per_page']:>11.2f}"
              f"{trips:>10}{evals:>14}")  # fmt: skip
    print("CPU ms per page by owner:")
    for name, key in rows:
        owners = sorted(figures[key]["cpu_ms_per_page_by_owner"].items(), key=lambda kv: -kv[1])
        print(f"  {name:<20}" + ", ".join(f"{owner} {ms:.2f}" for owner, ms in owners))
    line = (f"Shoal / Scrapy: {figures['ratio_shoal_vs_scrapy']:.2f}x pages/s, "
            f"{figures['ratio_machine_cpu_per_page']:.2f}x machine CPU per page, "
            f"{figures['ratio_node_cpu_per_page']:.2f}x node CPU per page (shared and other load apart)")  # fmt: skip
    if "ratio_2_vs_1" in figures:
        line += f"; 2 / 1 processes: {figures['ratio_2_vs_1']:.2f}x"
    print(line)
    print("targets: " + ", ".join(f"{name} {'OK' if ok else 'MISSED'}" for name, ok in checks.items()))


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="bench.crawl_vs_scrapy")
    parser.add_argument("--wide", action="store_true", help="the wide site: a hub and HOSTS hosts of 5 pages")
    parser.add_argument("--hosts", type=int, default=WIDE_HOSTS, help="hosts of the wide site (9,000)")
    parser.add_argument("--plain-items", type=int, default=0, help="CONCURRENT_ITEMS of plain Scrapy "
                        "(its default, 100, unless set; Shoal's is 16)")  # fmt: skip
    parser.add_argument("--only", default="", help="comma-separated runs of plain, one, two (no ratios, no file)")
    parser.add_argument("--set", action="append", default=[], metavar="NAME=VALUE", help="a Shoal setting, e.g. "
                        "KAFKA_PRODUCER_COMPRESSION=zstd, for every Shoal crawler of the run")  # fmt: skip
    return parser.parse_args(argv)


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == "--plain-scrapy":
        plain_scrapy(json.loads(sys.argv[2]), int(sys.argv[3]), sys.argv[4])
        sys.exit(0)
    sys.exit(main())
