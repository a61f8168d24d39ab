"""What a crawl's `extract` costs: the crawl-vs-Scrapy site crawled by one `shoal crawl` with
`"extract": ["text", "markdown"]` and without, interleaved rounds, the median of each (bench/crawl_vs_scrapy.py's
site, server, settings and CPU accounting: the extraction workers are the crawler's children, counted as its own).

`--site realistic` (the default) is crawl_vs_scrapy's own: pages of 10-100 KB served by nginx; `--site demo`
its 2 KB pages from the asyncio server. `--pages N` per host (default 1,500, 4 hosts).
Prints pages/s of each, their ratio (target >= 0.8), and CPU per page: the crawler's process tree,
the crawler process alone (the workers' share is the difference) and the whole machine's (other
load included: the load average is printed with each crawl).
Zero cost when off is checked by the tests (no worker started, trafilatura never imported:
tests/unit/test_extract_off.py); here "off" is the same crawl as crawl_vs_scrapy's.
Writes bench/results/extract_cost.json (extract_cost_demo.json for the demo site).
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
from pathlib import Path
from typing import Any

import psutil

from bench import crawl_vs_scrapy as base
from bench.common import bench_cluster, print_checks, write_result
from utils.demosite import Site

ROUNDS = int(os.environ.get("BENCH_ROUNDS", "3"))
ON = {"extract": ["text", "markdown"]}
# per run: base.run_shoal's figures (its cpu_ms_per_page the crawler's process tree here) and the crawler alone
KEEP = ("pages", "pages_per_s", "cpu_ms_per_page", "crawler_process_cpu_ms_per_page", "machine_cpu_ms_per_page")
OWN: list[float] = []  # the crawler process's own CPU seconds at each tree reading of the current run


def tree_cpu_seconds(pid: int) -> float:
    """User + system CPU of a process and its living children (the extraction workers); its own
    CPU is noted in OWN, so that the workers' share is the tree's less the crawler's."""
    try:
        process = psutil.Process(pid)
        own = sum(process.cpu_times()[:2])
        children = sum(sum(child.cpu_times()[:2]) for child in process.children(recursive=True))
    except psutil.NoSuchProcess:
        return 0.0
    OWN.append(own)
    return own + children


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--site",
        choices=("realistic", "demo"),
        default="realistic",
        help="realistic: crawl_vs_scrapy's 10-100 KB pages by nginx (the default); demo: 2 KB pages",
    )
    parser.add_argument("--pages", type=int, default=base.REALISTIC_PAGES, help="pages per host")
    parser.add_argument("--workers", type=int, default=2, help="EXTRACT_WORKERS (its default)")
    args = parser.parse_args(argv)
    shape: dict[str, Any] = {"port": base.site_port(args.site, args.pages), "site": args.site, "pages": args.pages,
                             "wide_hosts": 0, "wide_pages": 0, "plain_items": 0}  # fmt: skip
    site = base.build_site(shape)
    runs, loads = crawl(shape, site, args.workers)
    figures = summarise(runs, loads, args.site, args.workers)
    checks = {"pages/s with text + markdown >= 0.8 x off (median)": figures["ratio_pages_per_s"]["median"] >= 0.8}
    print(json.dumps(figures, indent=1))
    print_checks(checks)
    write_result("extract_cost" if args.site == "realistic" else "extract_cost_demo", figures, checks)
    return 0 if all(checks.values()) else 1


def crawl(shape: dict[str, Any], site: Site, workers: int) -> tuple[dict[str, list[dict[str, Any]]], list[str]]:
    """ROUNDS interleaved pairs of crawls, off then on; the load average before each crawl and after the last."""
    runs: dict[str, list[dict[str, Any]]] = {"off": [], "on": []}
    loads = []
    original = base._cpu_seconds
    base._cpu_seconds = tree_cpu_seconds  # the crawler's figure includes its extraction workers
    try:
        with tempfile.TemporaryDirectory(prefix="shoal-site-") as run_dir:
            server, server_pid = base.start_server(shape, site, Path(run_dir))
            try:
                with bench_cluster(**base.SHOAL, EXTRACT_WORKERS=workers) as cluster:
                    roots = base.service_roots(cluster, server_pid)
                    for round_ in range(ROUNDS):
                        for kind, fields in (("off", None), ("on", ON)):
                            loads.append(Path("/proc/loadavg").read_text().split()[0])
                            OWN.clear()
                            run = base.run_shoal(cluster, shape, site, 1, f"{kind}{round_}", roots, fields)
                            run["crawler_process_cpu_ms_per_page"] = 1000 * (OWN[-1] - OWN[0]) / (run["pages"] - 1)
                            runs[kind].append(run)
                            print(
                                f"round {round_ + 1} {kind}: {run['pages']} pages, {run['pages_per_s']:.1f} pages/s, "
                                f"{run['cpu_ms_per_page']:.2f} crawler tree ms/page "
                                f"(crawler process {run['crawler_process_cpu_ms_per_page']:.2f}), "
                                f"{run['machine_cpu_ms_per_page']:.2f} machine ms/page, load {loads[-1]}",
                                flush=True,
                            )
                    loads.append(Path("/proc/loadavg").read_text().split()[0])
            finally:
                server.stop()
    finally:
        base._cpu_seconds = original
    return runs, loads


def summarise(runs: dict[str, list[dict[str, Any]]], loads: list[str], site: str, workers: int) -> dict[str, Any]:
    """The median of interleaved rounds with its spread, never the best round (a loaded machine moves both);
    ratios and added CPU per round (each pair ran side by side), then their median."""
    pairs = list(zip(runs["off"], runs["on"], strict=True))

    def per_round(key: str, combine: Any) -> dict[str, float]:
        return base.spread([combine(on[key], off[key]) for off, on in pairs])

    figures: dict[str, Any] = {"site": site, "site_pages": runs["off"][0]["pages"], "rounds": ROUNDS,
                               "load_averages": loads, "workers": workers}  # fmt: skip
    for kind, found in runs.items():
        figures[kind] = {key: base.spread([r[key] for r in found]) for key in KEEP}
    figures["ratio_pages_per_s"] = per_round("pages_per_s", lambda on, off: on / off)
    figures["extra_cpu_ms_per_page"] = per_round("cpu_ms_per_page", lambda on, off: on - off)
    figures["extra_crawler_process_cpu_ms_per_page"] = per_round(
        "crawler_process_cpu_ms_per_page", lambda on, off: on - off
    )
    figures["extra_machine_cpu_ms_per_page"] = per_round("machine_cpu_ms_per_page", lambda on, off: on - off)
    figures["all_runs"] = {kind: [{k: round(r[k], 2) for k in KEEP} for r in found] for kind, found in runs.items()}
    return figures


if __name__ == "__main__":
    raise SystemExit(main())
