"""`make bench`: every benchmark in one run, then one table and bench/results/latest.json.

Each benchmark runs in its own process (`python -m bench.<name>`), starts its own services and
writes bench/results/<name>.json; this runner collects them. `python -m bench name ...` runs some.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time

from bench.common import RESULTS, machine

# In the order of issue 9's list: (a)+(b) crawl, (c) latency, (d) ingest, (e) round trips,
# (f) memory, (g) info/stop, (h) throttle accuracy; (e) round trips per page come with (a).
BENCHMARKS = ["crawl_vs_scrapy", "latency", "kafka_monitor_ingest", "memory", "info_stop",
              "throttle_accuracy", "scheduler_ops", "frontier_scale", "broad_crawl", "render",
              "items_vs_scrapy", "hostile_memory", "sink_throughput", "warc_write",
              "keda_simulation", "freshness", "sitemap_ingest", "idle_node", "follow_up_latency",
              "extract_quality", "extract_cost", "near_duplicates", "frontier_memory", "frontier_tier",
              "tier_kill", "fair_share"]


def run(name: str) -> dict | None:
    started = time.monotonic()
    print(f"\n=== {name} ===", flush=True)
    done = subprocess.run([sys.executable, "-m", f"bench.{name}"], check=False)
    path = RESULTS / f"{name}.json"
    if done.returncode != 0 or not path.exists():
        print(f"{name}: FAILED (exit {done.returncode})")
        return None
    result = json.loads(path.read_text())
    result["seconds"] = round(time.monotonic() - started, 1)
    return result


def _figures(result: dict) -> dict:
    """A result's figures; kafka_monitor_ingest writes them at the top level of its JSON."""
    return result.get("figures") or {k: v for k, v in result.items() if isinstance(v, int | float) and k != "seconds"}


def _targets(result: dict) -> dict:
    """A result's targets; kafka_monitor_ingest writes one `meets_target` flag."""
    return result.get("targets_met") or {"target": bool(result.get("meets_target"))}


def table(results: dict[str, dict | None]) -> str:
    lines = [f"{'benchmark':<22} {'target':<38} {'met':<5} figures", "-" * 100]
    for name, result in results.items():
        if result is None:
            lines.append(f"{name:<22} {'(did not run)':<38} {'NO':<5}")
            continue
        figures = ", ".join(f"{k}={v}" for k, v in sorted(_figures(result).items()))
        for i, (target, ok) in enumerate(sorted(_targets(result).items()) or [("-", True)]):
            lines.append(f"{name if i == 0 else '':<22} {target:<38} {'yes' if ok else 'NO':<5} "
                         f"{figures if i == 0 else ''}")
    return "\n".join(lines)


def main(names: list[str]) -> int:
    unknown = [n for n in names if n not in BENCHMARKS]
    if unknown:
        print(f"unknown benchmarks: {unknown}; known: {BENCHMARKS}")
        return 2
    results = {name: run(name) for name in (names or BENCHMARKS)}
    RESULTS.mkdir(exist_ok=True)
    latest = {"machine": machine(), "results": results}
    (RESULTS / "latest.json").write_text(json.dumps(latest, indent=2, sort_keys=True))
    print("\n" + table(results))
    print(f"\nwritten: {RESULTS / 'latest.json'}")
    met = all(r is not None and all(_targets(r).values()) for r in results.values())
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
