"""What every benchmark shares: private services, component processes, results files.

Benchmarks start their own Redis, ZooKeeper and broker on free ports in a temporary directory
(never the developer's node), run Shoal's real component processes against them, print their
figures and write `bench/results/<name>.json`. Timings are compared as ratios inside one run.
"""

from __future__ import annotations

import json
import os
import platform
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tests.support.cluster import TestCluster
from utils.services import start_local_services

RESULTS = Path(__file__).resolve().parent / "results"


@contextmanager
def bench_cluster(**overrides: Any) -> Iterator[TestCluster]:
    """Private services plus a TestCluster (settings and component launcher) on them."""
    with tempfile.TemporaryDirectory(prefix="shoal-bench-") as tmp:
        run_dir = Path(tmp)
        services = start_local_services(run_dir / "services")
        try:
            cluster = TestCluster(services, run_dir, **overrides)
            try:
                yield cluster
            finally:
                cluster.stop_all()
        finally:
            services.stop_all()


def machine() -> dict[str, Any]:
    """Where a figure came from."""
    return {
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }


def write_result(name: str, figures: dict[str, Any], checks: dict[str, bool]) -> Path:
    """Write `bench/results/<name>.json`: figures, target checks and the machine."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"{name}.json"
    path.write_text(json.dumps({"benchmark": name, "figures": figures, "targets_met": checks,
                                "machine": machine()}, indent=2, sort_keys=True))
    return path


def print_checks(checks: dict[str, bool]) -> None:
    """One PASS/FAIL line per target, after a benchmark's summary line."""
    for name, ok in checks.items():
        print(f"  {'PASS' if ok else 'FAIL'}  {name}")


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100) of a non-empty list."""
    ordered = sorted(values)
    rank = max(1, min(len(ordered), round(q / 100 * len(ordered) + 0.5)))
    return ordered[rank - 1]
