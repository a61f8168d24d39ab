"""A soak run (run by hand, not in `make bench`): one node crawling a generated broad site for hours,
with revisits on, to show leaks that only time shows (memory, file descriptors, Redis keys, consumer
state, tables).

The site is utils/demosite/broad.py's: HOSTS hosts of PAGES pages (2,000,000 pages over 20,000
hosts by default, addresses in 127.1.0.0/16, served by processes of their own). Two crawlers, a
redis monitor, a kafka monitor, a sink into a private PostgreSQL and a revisit process run on
private services. The crawl is throttle-bound, not CPU-bound: one fetch per host every --window
seconds (QUEUE_HITS 1, moderated), and the host indexes are seeded evenly over the first window, so
the node's rate is HOSTS / window pages/s from the start (13.3 with the defaults), well below what
two cores can fetch: a fall in pages/s is the node's, not the neighbours'. The window (25 minutes)
ends before the reference minute 30, so every host is known by then and growth after it is a leak.
Host indexes are revisited (the crawl's `revisit` policy, ahead of new pages).
Every --report-every seconds (300 by default) one line: pages/s since the last line, load average,
memory (private/PSS) and open fds (own + site connections) of every process (components and services),
Redis used_memory and key count, queued requests, the kafka monitor's and the sink's consumer lag,
PostgreSQL table sizes.
At the end the targets: pages/s of the last 30 minutes >= 0.95 x the first 30 after warm-up;
every process's private memory (USS; PSS is shown beside it) and own fds (its connections to the
site apart: they move between the crawlers with the leases) within +10 %, the largest of the
run's last window against the largest of the window from minute 30; Redis memory per queued
request within +10 % of minute 30's; no ERROR or CRITICAL log line that is not about the site
(for runs shorter than an hour the halves of the run after the first report stand in for those windows).
Run: `python -m bench.soak [--minutes 120] [--hosts 20000] [--pages 100] [--window 1500] [--report-every 300]`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import multiprocessing
import os
import resource
import shutil
import signal
import sys
import time
from pathlib import Path
from typing import Any

import psutil

from bench.common import bench_cluster, print_checks, write_result
from tests.e2e.test_crawler_helpers import crawler_started, seed
from tests.support.cluster import TestCluster
from tests.support.postgres import Postgres, start_postgres
from tests.support.services import wait_until
from tests.support.sink import sink_settings
from utils.config.clients import redis_client
from utils.config.settings import KAFKA_HEAP_ENV
from utils.demosite import SiteServer
from utils.demosite.broad import HUB, broad_site, host_address
from utils.frontier import progress
from utils.frontier.progress import CrawlRef
from utils.observability.metrics.group_lag import GroupLagCollector
from utils.observability.stats import live_processes
from utils.services import free_port
from utils.services.process import port_in_use

MIB = 1024 * 1024
CRAWLID = "soak"
SCHEMA = "soak"
GROWTH = 1.10  # the most memory, fds and Redis bytes per queued request may grow from the reference minute
REDIS_MAXMEMORY = "6gb"
HOSTS_PER_SERVER = 5000  # one listening socket per host and one per crawler connection, under 20,000 open files
# Host indexes come back every 30 to 120 minutes, ahead of the crawl's new pages (priority 1).
REVISIT = {"interval": 1800, "min": 1800, "max": 7200, "pages": r"^http://127\.1\.\d+\.\d+:\d+/$", "priority": 50}
SITE_ADDRESSES = ("127.1.", "127.2.0.1")  # the site's hosts and its hub (a log line naming one is about the site)


def serve_slice(hosts: int, pages: int, port: int, part: int, parts: int) -> None:
    """One of the site's server processes: every `parts`-th host (the hub with part 0), so that each
    stays under the open-files limit with one listening socket per host and the crawlers' connections."""
    site = broad_site(hosts, pages, port, part, parts)
    _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    asyncio.run(SiteServer(site).serve_forever())


def processes(cluster: TestCluster, postgres: Postgres) -> dict[str, int]:
    """Name -> pid of every component and service process."""
    found = {c.name: c.pid for c in cluster.components if c.alive()}
    found.update({name: s.pid for name, s in cluster.services.services.items() if s.pid})
    if postgres.service.pid:
        found["postgresql"] = postgres.service.pid
    return found


def _site_connections(member: psutil.Process) -> int:
    """The process's TCP connections to the site's hosts: they follow the hosts it happens to fetch."""
    try:
        return sum(1 for c in member.net_connections(kind="tcp") if c.raddr and c.raddr.ip.startswith(SITE_ADDRESSES))
    except psutil.Error:
        return 0


def _usage(pid: int) -> dict[str, float]:
    """Memory and fds of a process and its children (PostgreSQL's backends, the sink's extract pool).

    `private_mib` (USS) is the leak figure: memory no other process maps. `pss_mib` adds each shared
    page's share: it grows with PostgreSQL's shared buffers as they fill with the tables (a fixed
    `shared_buffers` pool, not a leak), and summing RSS would count that pool once per backend.
    `own_fds` leaves out the connections to the site (`site_connections`): two crawlers share the
    hosts, and which of them holds a host's connection moves with the leases each one pops."""
    try:
        proc = psutil.Process(pid)
        family = [proc, *proc.children(recursive=True)]
    except psutil.Error:
        return {"private_mib": 0.0, "pss_mib": 0.0, "fds": 0, "own_fds": 0, "site_connections": 0}
    uss, pss, fds, site = 0, 0, 0, 0
    for member in family:
        try:
            memory = member.memory_full_info()
            uss, pss, fds = uss + memory.uss, pss + memory.pss, fds + member.num_fds()
        except psutil.Error:
            continue
        site += _site_connections(member)
    return {"private_mib": round(uss / MIB, 1), "pss_mib": round(pss / MIB, 1), "fds": fds, "own_fds": fds - site,
            "site_connections": site}  # fmt: skip


def table_sizes(postgres: Postgres) -> dict[str, float]:
    """MiB of every table of the soak's schema, indexes and TOAST included."""
    with postgres.connect() as conn:
        found = conn.execute(
            "SELECT c.relname, pg_total_relation_size(c.oid) FROM pg_class c"
            " JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = %s AND c.relkind = 'r'", (SCHEMA,)
        ).fetchall()  # fmt: skip
    return {str(name): round(int(size) / MIB, 1) for name, size in sorted(found)}  # type: ignore[call-overload]


def sample(cluster: TestCluster, postgres: Postgres, client: Any, lag: GroupLagCollector) -> dict[str, Any]:
    """One report's raw figures."""
    reading = progress.read(client, CrawlRef("link", "testapp", CRAWLID))
    info = client.info("memory")
    return {"t": time.monotonic(), "crawled": reading.count("crawled") if reading else 0,
            "queued": reading.count("queued") if reading else 0, "load": [round(x, 2) for x in os.getloadavg()],
            "processes": {name: _usage(pid) for name, pid in processes(cluster, postgres).items()},
            "redis_used_mib": round(info["used_memory"] / MIB, 1), "redis_keys": client.dbsize(),
            "lag": {name: reading.lag for name, reading in lag.reading().items()},
            "tables_mib": table_sizes(postgres)}  # fmt: skip


def report(previous: dict[str, Any], now: dict[str, Any], began: float) -> str:
    rate = (now["crawled"] - previous["crawled"]) / max(now["t"] - previous["t"], 1e-9)
    procs = " ".join(f"{n}={p['private_mib']}/{p['pss_mib']}MiB/{p['own_fds']}+{p['site_connections']}fd"
                     for n, p in sorted(now["processes"].items()))  # fmt: skip
    lag = " ".join(f"{n}={v}" for n, v in sorted(now["lag"].items()))
    tables = " ".join(f"{n}={v}" for n, v in now["tables_mib"].items())
    return (f"[soak {(now['t'] - began) / 60:6.1f} min] {rate:7.1f} pages/s, {now['crawled']} crawled, "
            f"{now['queued']} queued; load {now['load']}; redis {now['redis_used_mib']} MiB, {now['redis_keys']} keys; "
            f"lag {lag}; tables MiB {tables}; {procs}")  # fmt: skip


def _per_queued(s: dict[str, Any]) -> float:
    return s["redis_used_mib"] * MIB / max(s["queued"], 1)


def peaks(samples: list[dict[str, Any]], start: float, end: float) -> dict[str, dict[str, float]]:
    """The largest of each figure of each process over the samples taken from `start` to `end`."""
    found: dict[str, dict[str, float]] = {}
    for s in samples:
        if start <= s["t"] <= end:
            for name, figures in s["processes"].items():
                mine = found.setdefault(name, {})
                for k, v in figures.items():
                    mine[k] = max(mine.get(k, 0.0), v)
    return found


def targets(
    samples: list[dict[str, Any]], minutes: float, errors: list[str], cycle: float
) -> tuple[dict[str, Any], dict[str, bool]]:
    """The soak targets over the samples (the first one is the start, the second ends warm-up).

    Open connections, and the memory their buffers take, rise and fall with the pages in flight over
    each throttle window (`cycle` seconds), so processes are compared peak to peak: the largest
    figure of the window from the reference minute on against the largest of the run's last window."""
    window = 30 * 60 if minutes >= 60 else (samples[-1]["t"] - samples[1]["t"]) / 2
    reference = next((s for s in samples if s["t"] - samples[0]["t"] >= min(window, 30 * 60)), samples[1])
    first = next(s for s in samples if s["t"] - samples[1]["t"] >= window)
    last_from = next(s for s in samples if s["t"] >= samples[-1]["t"] - window)
    early = (first["crawled"] - samples[1]["crawled"]) / max(first["t"] - samples[1]["t"], 1e-9)
    late = (samples[-1]["crawled"] - last_from["crawled"]) / max(samples[-1]["t"] - last_from["t"], 1e-9)
    cycle = min(cycle, (samples[-1]["t"] - reference["t"]) / 2)
    before = peaks(samples, reference["t"], reference["t"] + cycle)
    after = peaks(samples, samples[-1]["t"] - cycle, samples[-1]["t"])
    growth = {
        name: {k: round(after[name][k] / max(v, 1e-9), 3) for k, v in figures.items()}
        for name, figures in before.items() if name in after
    }  # fmt: skip
    redis_growth = _per_queued(samples[-1]) / max(_per_queued(reference), 1e-9)
    figures = {"early_pages_per_s": round(early, 1), "late_pages_per_s": round(late, 1), "growth": growth,
               "window_s": round(window), "cycle_s": round(cycle), "redis_keys_end": samples[-1]["redis_keys"],
               "redis_bytes_per_queued_growth": round(redis_growth, 3), "errors": errors[:20],
               "load": [s["load"] for s in samples], "lag_end": samples[-1]["lag"],
               "tables_mib_end": samples[-1]["tables_mib"]}  # fmt: skip
    checks = {
        "late pages/s >= 0.95x early": late >= 0.95 * early,
        "every process's private memory and own fds within +10 %": all(
            p[k] <= GROWTH for p in growth.values() for k in ("private_mib", "own_fds")),
        "Redis bytes per queued request within +10 %": redis_growth <= GROWTH,
        "no error in the logs that is not about the site": not errors,
    }  # fmt: skip
    return figures, checks


def log_errors(cluster: TestCluster) -> list[str]:
    """ERROR and CRITICAL lines of every component's log that do not name the site's hosts."""
    found = []
    for component in cluster.components:
        text = component.log_path.read_text(errors="replace") if component.log_path.exists() else ""
        for line in text.splitlines():
            about_site = any(a in line for a in SITE_ADDRESSES)
            if any(s in line for s in ("ERROR", "CRITICAL", "Traceback")) and not about_site:
                found.append(f"{component.name}: {line.strip()[:300]}")
    return found


def soak(cluster: TestCluster, postgres: Postgres, port: int, args: argparse.Namespace) -> list[dict[str, Any]]:
    sink_settings(cluster, postgres, SCHEMA)
    for role in ("redis-monitor", "kafka-monitor", "sink", "revisit"):
        cluster.start(role)
    for i in range(2):
        cluster.start("crawl", "--spider", "link", name=f"crawler-{i}")
    wait_until(lambda: crawler_started(cluster, 2), timeout=120)
    client = redis_client(cluster.settings, decode=True)
    client.config_set("maxmemory", REDIS_MAXMEMORY)  # ~2,000,000 requests queued once every host index is in
    wait_until(lambda: live_processes(client, "sink", 60), 120, message="no sink heartbeat")
    lag = GroupLagCollector.from_settings(cluster.settings)
    indexes = [f"http://{host_address(i)}:{port}/" for i in range(args.hosts)]
    began = time.monotonic()
    seeded = 0
    samples = [sample(cluster, postgres, client, lag)]
    while time.monotonic() - began < args.minutes * 60:
        elapsed = time.monotonic() - began
        # Host indexes are seeded evenly over the first throttle window, so each host's fetches keep
        # their own phase and the node's rate is hosts / window from the start (all at once, every
        # host's first fetch would be free and the start a CPU-bound burst, then a lull).
        due = min(len(indexes), int(len(indexes) * elapsed / args.window) + 1)
        for url in indexes[seeded:due]:
            seed(cluster, url, crawlid=CRAWLID, maxdepth=1, revisit=REVISIT)
        seeded = due
        if elapsed >= len(samples) * args.report_every:
            samples.append(sample(cluster, postgres, client, lag))
            print(report(samples[-2], samples[-1], began), flush=True)
            dead = [c.name for c in cluster.components if not c.alive()]
            if dead:
                raise RuntimeError(f"processes died: {dead}")
        time.sleep(1.0)
    return samples


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=120)
    parser.add_argument("--hosts", type=int, default=20000)
    parser.add_argument("--pages", type=int, default=100, help="pages per host, its index included")
    parser.add_argument("--window", type=int, default=1500, help="seconds between two fetches of one host")
    parser.add_argument("--report-every", type=float, default=300, help="seconds between report lines")
    parser.add_argument("--keep-logs", type=Path, help="copy the components' logs here at the end")
    parser.add_argument("--samples", type=Path, help="write every report's raw figures here (JSON) at the end")
    args = parser.parse_args()
    # SIGTERM (a run stopped early; background jobs ignore SIGINT) ends it through the `finally`s below,
    # which stop the components, the services and the site servers.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))  # inherited by every process started below
    # A production broker's heap is fixed (Kafka's own start script sets -Xms to -Xmx); pre-touched,
    # it is resident from the start, so the broker's growth is anything but its heap filling.
    os.environ.setdefault(KAFKA_HEAP_ENV, "-Xms512m -Xmx512m -XX:+AlwaysPreTouch")
    port = free_port()
    postgres, pg_root = start_postgres()
    overrides = {"ZOOKEEPER_ENABLED": "false", "QUEUE_HITS": 1, "QUEUE_WINDOW": args.window, "QUEUE_MODERATED": "true",
                 "LINKS_PER_PAGE_MAX": args.hosts + 10, "LINKS_PARSE_SECONDS_MAX": 0, "LOG_LEVEL": "WARNING",
                 "SCHEDULER_IDLE_POLL": 0.5, "SCHEDULER_FLUSH_INTERVAL": 0.5,
                 "REDIS_MONITOR_SLEEP_TIME": 0.5}  # fmt: skip
    try:
        with bench_cluster(**overrides) as cluster:
            parts = max(1, math.ceil(args.hosts / HOSTS_PER_SERVER))
            servers = [multiprocessing.Process(target=serve_slice, args=(args.hosts, args.pages, port, n, parts),
                                               daemon=True) for n in range(parts)]  # fmt: skip
            for server in servers:
                server.start()
            try:
                last = host_address(args.hosts - 1)
                wait_until(lambda: port_in_use(HUB, port) and port_in_use(last, port), timeout=1200)
                samples = soak(cluster, postgres, port, args)
            finally:
                for server in servers:
                    server.terminate()
                cluster.stop_all()
                errors = log_errors(cluster)
                if args.keep_logs:
                    args.keep_logs.mkdir(parents=True, exist_ok=True)
                    for component in cluster.components:
                        shutil.copy(component.log_path, args.keep_logs / component.log_path.name)
    finally:
        postgres.service.stop()
        shutil.rmtree(pg_root, ignore_errors=True)
    if len(samples) < 3:
        print("soak: too short for the targets (fewer than two reports)")
        return 1
    if args.samples:
        args.samples.write_text(json.dumps(samples))
    figures, checks = targets(samples, args.minutes, errors, args.window)
    figures.update(
        {"minutes": args.minutes, "hosts": args.hosts, "pages_per_host": args.pages, "throttle_s": args.window}
    )
    print(json.dumps(figures))
    print_checks(checks)
    write_result("soak", figures, checks)
    return 0 if all(checks.values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
