"""Peak memory of one crawler process fed the hostile site (issue 22): a 200 MB body with and
without Content-Length, gzip/brotli/zstd bombs of 200 MB, a page of 1,000,000 links, a redirect
loop and a 1 byte/s trickle, one after the other, after a baseline crawl of a small demo site.

The figure is the crawler's VmHWM (peak resident set, /proc/<pid>/status) after each input, so
the growth each one causes is visible; the bound is the target. DOWNLOAD_MAXSIZE is raised to
40 MiB so the link page (27 MB of HTML) is parsed and capped rather than refused.
`--extract`: every crawl also asks for text, Markdown, metadata and near-duplicates (issue 46); the
extraction workers' peak RSS is reported too, and every input must still settle (none stalls them).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import psutil

from bench.common import bench_cluster, print_checks, write_result
from tests.e2e.test_crawler_helpers import crawler_started, progress, seed, settled
from tests.support.services import wait_until
from utils.demosite import SiteServer, generate_site
from utils.demosite.hostile import HostileSite
from utils.services import free_port

HOST = "127.22.0.40"
INPUTS = ["/big", "/big-chunked", "/gzip-bomb", "/br-bomb", "/zstd-bomb", "/links", "/loop", "/trickle"]
BOUND_MB = 400  # MiB; target: the crawler's peak RSS over every hostile input (measured 249 with a 40 MiB limit)
SETTINGS = {"QUEUE_HITS": 0, "RETRY_TIMES": 0, "DOWNLOAD_TIMEOUT": 5, "ROBOTSTXT_OBEY": False,
            "DOWNLOAD_MAXSIZE": 40 * 1024 * 1024, "LINKS_PER_PAGE_MAX": 100, "LOG_LEVEL": "WARNING"}  # fmt: skip


def peak_mb(pid: int) -> float:
    """VmHWM of `pid` in MiB: the most resident memory it has had so far."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return round(int(line.split()[1]) / 1024, 1)
    raise RuntimeError(f"no VmHWM for pid {pid}")


EXTRACT = {"extract": ["text", "markdown", "metadata"], "near_duplicates": "flag"}


def workers_peak_mb(pid: int) -> float:
    """The largest VmHWM among the crawler's child processes (its extraction workers), 0 without any."""
    children = psutil.Process(pid).children(recursive=True)
    return max((peak_mb(child.pid) for child in children if child.is_running()), default=0.0)


def main() -> None:
    extract = "--extract" in sys.argv[1:]
    fields = EXTRACT if extract else {}
    figures: dict[str, float | int] = {}
    with bench_cluster(**SETTINGS) as cluster, HostileSite(HOST, free_port(HOST)) as hostile:
        crawler = cluster.start("crawl", "--spider", "link")
        wait_until(lambda: crawler_started(cluster), timeout=60, message="the crawler did not start")
        site = generate_site(hosts=1, pages_per_host=60, seed=40, base_ip_octet=40, port=free_port("127.0.0.40"))
        with SiteServer(site):
            seed(cluster, site.seed_urls()[0], crawlid="baseline", maxdepth=3, **fields)
            wait_until(lambda: settled(progress(cluster, "baseline")), timeout=120)
        figures["baseline_peak_mb"] = peak_mb(crawler.pid)
        for path in INPUTS:
            crawlid = path.strip("/")
            started = time.monotonic()
            seed(cluster, hostile.url(path), crawlid=crawlid, maxdepth=1, **fields)
            wait_until(lambda c=crawlid: settled(progress(cluster, c)), timeout=180, message=f"{path} not settled")
            figures[f"{crawlid}_peak_mb"] = peak_mb(crawler.pid)
            figures[f"{crawlid}_seconds"] = round(time.monotonic() - started, 1)
            if extract:
                figures[f"{crawlid}_workers_peak_mb"] = workers_peak_mb(crawler.pid)
            print(f"{path:<14} peak {figures[f'{crawlid}_peak_mb']:>7} MiB  {figures[f'{crawlid}_seconds']:>5} s",
                  flush=True)  # fmt: skip
        figures["alive_after"] = int(crawler.alive())
    figures["peak_mb"] = max(v for k, v in figures.items() if k.endswith("_peak_mb") and "workers" not in k)
    checks = {f"crawler peak RSS <= {BOUND_MB} MiB": figures["peak_mb"] <= BOUND_MB,
              "crawler alive after every input": figures["alive_after"] == 1}  # fmt: skip
    path = write_result("hostile_memory_extract" if extract else "hostile_memory", figures, checks)
    print(f"crawler peak memory: baseline {figures['baseline_peak_mb']} MiB, over the hostile inputs "
          f"{figures['peak_mb']} MiB -> {path}")
    print_checks(checks)


if __name__ == "__main__":
    main()
