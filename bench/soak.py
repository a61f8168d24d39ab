"""A soak run (run by hand, not in `make bench`): one node crawling a generated broad site for hours,
to show leaks that only time shows (memory, file descriptors, Redis keys).

The site is utils/demosite/broad.py's: a hub linking HOSTS hosts of PAGES pages (2,000,000 pages
over 20,000 hosts by default, addresses in 127.1.0.0/16, served by a process of its own). Two
crawlers, a redis monitor and a kafka monitor run on private services. Every --report-every
seconds (300 by default) one line: pages/s since the last line, RSS and open fds of every process
(components and services), Redis used_memory and key count.
At the end the targets: pages/s of the last 30 minutes >= 0.95 x the first 30 after warm-up;
every process's RSS and fds within +10 % of their value at minute 30; (for runs shorter than an
hour the halves of the run after the first report stand in for those windows).
Run: `python -m bench.soak [--minutes 120] [--hosts 20000] [--pages 100] [--report-every 300]`.
Not measured yet: revisits (needs the sink and PostgreSQL), Kafka consumer lag, table sizes.
"""

from __future__ import annotations

import argparse
import multiprocessing
import time
from typing import Any

import psutil

from bench.broad_crawl import serve
from bench.common import bench_cluster, print_checks, write_result
from tests.e2e.test_crawler_helpers import crawler_started, seed
from tests.support.cluster import TestCluster
from tests.support.services import wait_until
from utils.config.clients import redis_client
from utils.demosite.broad import HUB
from utils.frontier import progress
from utils.frontier.progress import CrawlRef
from utils.services import free_port
from utils.services.process import port_in_use

MIB = 1024 * 1024
CRAWLID = "soak"
GROWTH = 1.10  # the most RSS and fds may grow from the reference minute


def processes(cluster: TestCluster) -> dict[str, int]:
    """Name -> pid of every component and service process."""
    found = {c.name: c.pid for c in cluster.components if c.alive()}
    found.update({name: s.pid for name, s in cluster.services.services.items() if s.pid})
    return found


def sample(cluster: TestCluster, client: Any) -> dict[str, Any]:
    """One report's raw figures."""
    reading = progress.read(client, CrawlRef("link", "testapp", CRAWLID))
    per_process = {}
    for name, pid in processes(cluster).items():
        try:
            proc = psutil.Process(pid)
            per_process[name] = {"rss_mib": round(proc.memory_info().rss / MIB, 1), "fds": proc.num_fds()}
        except psutil.Error:
            per_process[name] = {"rss_mib": 0.0, "fds": 0}
    info = client.info("memory")
    return {"t": time.monotonic(), "crawled": reading.count("crawled") if reading else 0,
            "processes": per_process, "redis_used_mib": round(info["used_memory"] / MIB, 1),
            "redis_keys": client.dbsize()}  # fmt: skip


def report(previous: dict[str, Any], now: dict[str, Any], began: float) -> str:
    rate = (now["crawled"] - previous["crawled"]) / max(now["t"] - previous["t"], 1e-9)
    procs = " ".join(f"{n}={p['rss_mib']}MiB/{p['fds']}fd" for n, p in sorted(now["processes"].items()))
    return (f"[soak {(now['t'] - began) / 60:6.1f} min] {rate:7.1f} pages/s, {now['crawled']} crawled; "
            f"redis {now['redis_used_mib']} MiB, {now['redis_keys']} keys; {procs}")  # fmt: skip


def targets(samples: list[dict[str, Any]], minutes: float) -> tuple[dict[str, Any], dict[str, bool]]:
    """The soak targets over the samples (the first one is the start, the second ends warm-up)."""
    window = 30 * 60 if minutes >= 60 else (samples[-1]["t"] - samples[1]["t"]) / 2
    reference = next((s for s in samples if s["t"] - samples[0]["t"] >= min(window, 30 * 60)), samples[1])
    first = next(s for s in samples if s["t"] - samples[1]["t"] >= window)
    last_from = next(s for s in samples if s["t"] >= samples[-1]["t"] - window)
    early = (first["crawled"] - samples[1]["crawled"]) / max(first["t"] - samples[1]["t"], 1e-9)
    late = (samples[-1]["crawled"] - last_from["crawled"]) / max(samples[-1]["t"] - last_from["t"], 1e-9)
    growth = {
        name: {k: round(samples[-1]["processes"][name][k] / max(v, 1e-9), 3) for k, v in figures.items()}
        for name, figures in reference["processes"].items() if name in samples[-1]["processes"]
    }  # fmt: skip
    figures = {"early_pages_per_s": round(early, 1), "late_pages_per_s": round(late, 1), "growth": growth,
               "window_s": round(window), "redis_keys_end": samples[-1]["redis_keys"]}  # fmt: skip
    checks = {
        "late pages/s >= 0.95x early": late >= 0.95 * early,
        "every process's RSS and fds within +10 %": all(g <= GROWTH for p in growth.values() for g in p.values()),
    }
    return figures, checks


def soak(cluster: TestCluster, hub: str, minutes: float, every: float) -> list[dict[str, Any]]:
    for role in ("redis-monitor", "kafka-monitor"):
        cluster.start(role)
    for i in range(2):
        cluster.start("crawl", "--spider", "link", name=f"crawler-{i}")
    wait_until(lambda: crawler_started(cluster, 2), timeout=120)
    client = redis_client(cluster.settings, decode=True)
    seed(cluster, hub, crawlid=CRAWLID, maxdepth=2)
    began = time.monotonic()
    samples = [sample(cluster, client)]
    while time.monotonic() - began < minutes * 60:
        time.sleep(min(every, max(minutes * 60 - (time.monotonic() - began), 0.1)))
        samples.append(sample(cluster, client))
        print(report(samples[-2], samples[-1], began), flush=True)
        dead = [c.name for c in cluster.components if not c.alive()]
        if dead:
            raise RuntimeError(f"processes died: {dead}")
    return samples


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=120)
    parser.add_argument("--hosts", type=int, default=20000)
    parser.add_argument("--pages", type=int, default=100, help="pages per host, its index included")
    parser.add_argument("--report-every", type=float, default=300, help="seconds between report lines")
    args = parser.parse_args()
    port = free_port()
    with bench_cluster(ZOOKEEPER_ENABLED="false") as cluster:
        # no access log: it would grow for hours; the figures come from Redis and /proc
        server = multiprocessing.Process(target=serve, args=(args.hosts, args.pages, port, "/dev/null"), daemon=True)
        server.start()
        try:
            wait_until(lambda: port_in_use(HUB, port), timeout=600)
            samples = soak(cluster, f"http://{HUB}:{port}/", args.minutes, args.report_every)
        finally:
            server.terminate()
    if len(samples) < 3:
        print("soak: too short for the targets (fewer than two reports)")
        return 1
    figures, checks = targets(samples, args.minutes)
    figures.update({"minutes": args.minutes, "hosts": args.hosts, "pages_per_host": args.pages})
    print(figures)
    print_checks(checks)
    write_result("soak", figures, checks)
    return 0 if all(checks.values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
