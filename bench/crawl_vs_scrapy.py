"""Crawl throughput: plain single-process Scrapy vs one and two Shoal crawler processes (issue 4 item 8).

`.venv/bin/python -m bench.crawl_vs_scrapy` generates a 5-host x 1000-page demo site, serves it from
a separate process, and crawls all of it three times in one run, with the same concurrency, robots.txt
obeyed, the same link extractor and the throttle off (QUEUE_HITS=0):
  1. plain Scrapy: a Spider with a LinkExtractor, Scrapy's own scheduler and dupefilter, items yielded;
  2. one `shoal crawl` process: Redis frontier (leased pops, Lua dupefilter), page messages confirmed
     by the broker before each ack;
  3. two `shoal crawl` processes sharing the frontier.
Throughput is pages/s between the first and the last page of each crawl (process start-up excluded),
best of BENCH_ROUNDS (2) interleaved rounds; CPU ms per page of the crawler processes is reported too,
as it does not depend on what else the machine runs.
Shoal's seeds are written to Redis as the kafka monitor writes them. Redis round trips per page are
counted by the crawler (every call and pipeline) and cross-checked with Redis' INFO commandstats.
Prints a table and writes bench/results/crawl_vs_scrapy.json. Targets: Shoal >= 0.9x plain Scrapy,
two processes >= 1.7x one.
"""

from __future__ import annotations

import asyncio
import json
import multiprocessing
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.common import bench_cluster, write_result
from tests.support.cluster import TestCluster
from tests.support.kafka import TopicReader
from tests.support.services import wait_until
from utils.config.clients import redis_client
from utils.demosite import SiteServer, generate_site
from utils.frontier import progress
from utils.frontier.progress import CrawlRef
from utils.services import free_port
from utils.services.process import port_in_use

SITE = {"hosts": 5, "pages_per_host": 1000, "seed": 17, "base_ip_octet": 170}
CONCURRENCY = 16
SHOAL = {"QUEUE_HITS": 0, "CONCURRENT_REQUESTS": CONCURRENCY, "CONCURRENT_REQUESTS_PER_DOMAIN": CONCURRENCY,
         "ZOOKEEPER_ENABLED": "false", "SCHEDULER_IDLE_POLL": 0.05, "SCHEDULER_FLUSH_INTERVAL": 0.05}  # fmt: skip
ROUNDS = int(os.environ.get("BENCH_ROUNDS", "2"))
DEPTH = 100  # the schema's most; the site is 6 links deep


def serve(port: int) -> None:
    """The site server's own process: the crawlers' CPU is not shared with it through the GIL."""
    asyncio.run(SiteServer(generate_site(port=port, **SITE)).serve_forever())


def plain_scrapy(port: int, out: str) -> None:
    """Run in a subprocess: crawl the whole site with plain Scrapy and write its item times."""
    from scrapy import Request, Spider, signals
    from scrapy.crawler import CrawlerProcess
    from scrapy.http import TextResponse
    from scrapy.linkextractors import LinkExtractor

    site = generate_site(port=port, **SITE)
    times: list[float] = []
    urls: list[str] = []
    cpu: list[float] = []

    class PlainSpider(Spider):
        name = "plain"
        start_urls = site.seed_urls()
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
        if len(times) == 1:
            cpu.append(time.process_time())
        cpu[1:] = [time.process_time()]

    process = CrawlerProcess({
        "CONCURRENT_REQUESTS": CONCURRENCY, "CONCURRENT_REQUESTS_PER_DOMAIN": CONCURRENCY, "ROBOTSTXT_OBEY": True,
        "HTTPERROR_ALLOW_ALL": True, "LOG_LEVEL": "WARNING", "TELNETCONSOLE_ENABLED": False, "DOWNLOAD_TIMEOUT": 10,
        "USER_AGENT": "Shoal/0.1 (+https://github.com/shoal-crawler/shoal)", "REACTOR_THREADPOOL_MAXSIZE": 4,
    })  # fmt: skip
    crawler = process.create_crawler(PlainSpider)
    crawler.signals.connect(scraped, signal=signals.item_scraped)
    process.crawl(crawler)
    process.start()
    Path(out).write_text(json.dumps({"times": times, "urls": urls, "cpu": cpu[-1] - cpu[0]}))


def run_plain(port: int, expected: set[str]) -> dict[str, Any]:
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        subprocess.run([sys.executable, "-m", "bench.crawl_vs_scrapy", "--plain-scrapy", str(port), out.name],
                       check=True)  # fmt: skip
        result = json.loads(Path(out.name).read_text())
    assert set(result["urls"]) == expected, "plain Scrapy did not crawl the expected pages"
    times = result["times"]
    seconds = times[-1] - times[0]
    return {"pages": len(times), "seconds": seconds, "pages_per_s": (len(times) - 1) / seconds,
            "cpu_ms_per_page": 1000 * result["cpu"] / (len(times) - 1)}  # fmt: skip


def run_shoal(cluster: TestCluster, site: Any, processes: int, crawlid: str) -> dict[str, Any]:
    from tests.e2e.test_crawler_helpers import seed

    crawlers = [cluster.start("crawl", "--spider", "link", name=f"{crawlid}-{i}") for i in range(processes)]
    wait_until(lambda: all("Scheduler opened" in c.log_path.read_text() for c in crawlers), timeout=60)
    client = redis_client(cluster.settings)
    evalsha_before = _evalsha_calls(client)
    for url in site.seed_urls():
        seed(cluster, url, crawlid=crawlid, maxdepth=DEPTH, deny_extensions=[])
    first = last = 0.0
    cpu_start = 0.0
    crawl = CrawlRef("link", "testapp", crawlid)  # seed()'s appid
    while True:  # one client for every poll: a new one each time cost ~4 % of a core, taken from the crawlers
        reading = progress.read(client, crawl)
        crawled = reading.count("crawled") if reading else 0
        now = time.time()
        if not first and crawled:
            first = now
            cpu_start = sum(_cpu_seconds(c.pid) for c in crawlers)
        if crawled and reading is not None and not reading.pending:
            last = now
            break
        time.sleep(0.05)
    pages = crawled
    cpu = sum(_cpu_seconds(c.pid) for c in crawlers) - cpu_start
    evalsha = _evalsha_calls(client) - evalsha_before
    for crawler in crawlers:
        crawler.stop()
    trips = sum(_round_trips(crawler.log_path) for crawler in crawlers)
    return {"pages": pages, "seconds": last - first, "pages_per_s": (pages - 1) / (last - first),
            "round_trips_per_page": trips / pages, "evalsha_per_page": evalsha / pages,
            "cpu_ms_per_page": 1000 * cpu / (pages - 1)}  # fmt: skip


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
    reader.wait_for(lambda got: len(got) >= total, timeout=120)
    reader.close()
    for crawlid in crawlids:
        got = [m["url"] for m in reader.messages if m["crawlid"] == crawlid]
        assert sorted(got) == sorted(expected), f"{crawlid}: the firehose does not hold each page once"


def main() -> int:
    port = free_port()
    server = multiprocessing.Process(target=serve, args=(port,), daemon=True)
    server.start()
    site = generate_site(port=port, **SITE)
    wait_until(lambda: port_in_use(f"127.0.0.{SITE['base_ip_octet']}", port), timeout=60)
    expected = set(site.reachable(site.seed_urls(), DEPTH, obey_robots=True))
    runs: dict[str, list[dict[str, Any]]] = {"plain": [], "one": [], "two": []}
    try:
        with bench_cluster(**SHOAL) as cluster:
            for round_ in range(ROUNDS):  # interleaved, best of each: other load on the machine comes and goes
                runs["plain"].append(run_plain(port, expected))
                runs["one"].append(run_shoal(cluster, site, 1, f"one{round_}"))
                runs["two"].append(run_shoal(cluster, site, 2, f"two{round_}"))
            check_firehose(cluster, expected, [f"{n}{r}" for r in range(ROUNDS) for n in ("one", "two")])
    finally:
        server.terminate()
    plain, one, two = (max(runs[k], key=lambda r: r["pages_per_s"]) for k in ("plain", "one", "two"))
    figures = {"site_pages": len(expected), "concurrency": CONCURRENCY, "rounds": ROUNDS, "plain_scrapy": plain,
               "shoal_1_process": one, "shoal_2_processes": two,
               "ratio_shoal_vs_scrapy": one["pages_per_s"] / plain["pages_per_s"],
               "ratio_2_vs_1": two["pages_per_s"] / one["pages_per_s"]}  # fmt: skip
    checks = {"shoal_ge_0.9x_scrapy": figures["ratio_shoal_vs_scrapy"] >= 0.9,
              "two_ge_1.7x_one": figures["ratio_2_vs_1"] >= 1.7,
              "round_trips_le_3_per_page": max(one["round_trips_per_page"], two["round_trips_per_page"]) <= 3,
              }  # fmt: skip
    print_table(figures, checks)
    print(f"written {write_result('crawl_vs_scrapy', figures, checks)}")
    return 0


def print_table(figures: dict[str, Any], checks: dict[str, bool]) -> None:
    print(f"\n{figures['site_pages']} pages, concurrency {figures['concurrency']}, throttle off")
    head = f"{'crawler':<22}{'pages':>7}{'seconds':>9}{'pages/s':>9}{'CPU ms/page':>12}"
    print(f"{head}{'RTT/page':>10}{'EVALSHA/page':>14}")
    for name, key in (("plain Scrapy", "plain_scrapy"), ("Shoal, 1 process", "shoal_1_process"),
                      ("Shoal, 2 processes", "shoal_2_processes")):  # fmt: skip
        row = figures[key]
        trips = f"{row['round_trips_per_page']:.3f}" if "round_trips_per_page" in row else "-"
        evals = f"{row['evalsha_per_page']:.3f}" if "evalsha_per_page" in row else "-"
        cpu = f"{row['cpu_ms_per_page']:.2f}"
        print(
            f"{name:<22}{row['pages']:>7}{row['seconds']:>9.2f}{row['pages_per_s']:>9.1f}{cpu:>12}{trips:>10}{evals:>14}"
        )
    print(f"Shoal / Scrapy: {figures['ratio_shoal_vs_scrapy']:.2f}x   2 / 1 processes: {figures['ratio_2_vs_1']:.2f}x")
    print("targets: " + ", ".join(f"{name} {'OK' if ok else 'MISSED'}" for name, ok in checks.items()))


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--plain-scrapy":
        plain_scrapy(int(sys.argv[2]), sys.argv[3])
        sys.exit(0)
    sys.exit(main())
