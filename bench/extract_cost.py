"""What a crawl's `extract` costs: the crawl-vs-Scrapy demo site crawled by one `shoal crawl` with
`"extract": ["text", "markdown"]` and without, interleaved rounds, the median of each (bench/crawl_vs_scrapy.py's
site, settings and CPU accounting: the extraction workers are the crawler's children, counted as its own).

Prints pages/s of each, their ratio (target >= 0.8), and CPU per page: the crawler's process tree
and the whole machine's. Zero cost when off is checked by the tests (no worker started, trafilatura
never imported: tests/unit/test_extract_off.py); here "off" is the same crawl as crawl_vs_scrapy's.
Writes bench/results/extract_cost.json. `--pages N` per host (default 1,500, 4 hosts).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
from pathlib import Path
from typing import Any

import psutil

from bench import crawl_vs_scrapy as base
from bench.common import bench_cluster, print_checks, write_result
from tests.support.services import wait_until
from utils.demosite import generate_site
from utils.services import free_port
from utils.services.process import port_in_use

ROUNDS = int(os.environ.get("BENCH_ROUNDS", "3"))
ON = {"extract": ["text", "markdown"]}


def tree_cpu_seconds(pid: int) -> float:
    """User + system CPU of a process and its living children (the extraction workers)."""
    try:
        process = psutil.Process(pid)
        total = sum(process.cpu_times()[:2])
        return total + sum(sum(child.cpu_times()[:2]) for child in process.children(recursive=True))
    except psutil.NoSuchProcess:
        return 0.0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pages", type=int, default=base.DEMO["pages_per_host"], help="pages per host")
    parser.add_argument("--workers", type=int, default=2, help="EXTRACT_WORKERS (its default)")
    args = parser.parse_args(argv)
    base.DEMO["pages_per_host"] = args.pages
    shape = {"port": free_port(), "site": "demo", "pages": args.pages, "wide_hosts": 0, "wide_pages": 0,
             "plain_items": 0}  # fmt: skip
    server = multiprocessing.Process(target=base.serve, args=(shape,), daemon=True)
    server.start()
    site = generate_site(port=shape["port"], **base.DEMO)
    wait_until(lambda: port_in_use(site.hosts[-1].rsplit(":", 1)[0], shape["port"]), timeout=120)
    runs: dict[str, list[dict[str, Any]]] = {"off": [], "on": []}
    loads = []
    original = base._cpu_seconds
    base._cpu_seconds = tree_cpu_seconds  # the crawler's figure includes its extraction workers
    try:
        with bench_cluster(**base.SHOAL, EXTRACT_WORKERS=args.workers) as cluster:
            roots = base.service_roots(cluster, server.pid or 0)
            for round_ in range(ROUNDS):
                loads.append(Path("/proc/loadavg").read_text().split()[0])
                for kind, fields in (("off", None), ("on", ON)):
                    run = base.run_shoal(cluster, shape, site, 1, f"{kind}{round_}", roots, fields)
                    runs[kind].append(run)
                    print(
                        f"round {round_ + 1} {kind}: {run['pages_per_s']:.1f} pages/s, "
                        f"{run['cpu_ms_per_page']:.2f} crawler tree ms/page, load {loads[-1]}",
                        flush=True,
                    )
            loads.append(Path("/proc/loadavg").read_text().split()[0])
    finally:
        base._cpu_seconds = original
        server.terminate()
    # The median of interleaved rounds with its spread, never the best round (a loaded machine moves both).
    ratios = [on["pages_per_s"] / off["pages_per_s"] for off, on in zip(runs["off"], runs["on"], strict=True)]
    extra = [on["cpu_ms_per_page"] - off["cpu_ms_per_page"] for off, on in zip(runs["off"], runs["on"], strict=True)]
    keep = ("pages", "pages_per_s", "cpu_ms_per_page", "machine_cpu_ms_per_page")
    figures = {"site_pages": runs["off"][0]["pages"], "rounds": ROUNDS, "load_averages": loads, "workers": args.workers,
               **{kind: {k: base.spread([r[k] for r in found]) for k in keep} for kind, found in runs.items()},
               "ratio_pages_per_s": base.spread(ratios), "extra_cpu_ms_per_page": base.spread(extra),
               "all_runs": {k: [round(r["pages_per_s"], 1) for r in v] for k, v in runs.items()}}  # fmt: skip
    checks = {"pages/s with text + markdown >= 0.8 x off (median)": figures["ratio_pages_per_s"]["median"] >= 0.8}
    print(json.dumps(figures, indent=1))
    print_checks(checks)
    write_result("extract_cost", figures, checks)
    return 0 if all(checks.values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
