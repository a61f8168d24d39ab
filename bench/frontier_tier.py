"""The disk tier (FRONTIER_DISK_TIER_DSN): Redis bytes per domain, disk bytes per URL, enqueue while popping.

N children of a realistic crawl (bench/frontier_memory.py) over D domains are enqueued through the
frontier's own script while a popper leases and acks under the default throttle and a mover process
(utils/frontier/tier.py, as the redis monitor runs it) drains the spill stream into PostgreSQL and
refills low windows. Reported: enqueue URLs/s with and without the tier (interleaved rounds on a
loaded machine: the ratio is the figure), Redis `used_memory` growth per domain and per URL once
the stream is drained, by structure, at two sizes over the same domains (RAM follows domains, not
URLs), PostgreSQL bytes per URL (table, partitions and indexes), how often a window ran dry while
its tail was on disk, and the refill latency, against SQLite on the same rows (a store on one
machine, the other candidate measured here).
Targets (issue 41): Redis < 1 GiB at 20,000,000 URLs over 20,000 domains; enqueue >= 20,000 URLs/s
while popping; 0 dry windows.
Run: `python -m bench.frontier_tier [--urls 2000000] [--small 200000] [--domains 20000] [--rounds 2]`.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import random
import shutil
import sqlite3
import statistics
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import redis

from bench.common import print_checks, write_result
from bench.frontier_memory import by_structure, children
from tests.support.postgres import start_postgres
from tests.support.tier import tier_dsn
from utils.config.settings import Settings, default_values
from utils.frontier import Ack, Frontier, ThrottlePolicy
from utils.frontier.tier import DiskTier
from utils.services import start_local_services

BATCH = 1000
POP_RATE = 2000  # leases per second: a few crawlers' pace
TABLE = "frontier_tail"
_DEFAULTS = Settings(default_values())
THROTTLE = ThrottlePolicy(hits=_DEFAULTS.get_int("QUEUE_HITS"), window=_DEFAULTS.get_float("QUEUE_WINDOW"))


def mover(host: str, port: int, dsn: str, window: int, stop: Any, out: Any) -> None:
    """The mover's loop in its own process; sends its refill latencies (s) when stopped."""
    client = redis.Redis(host=host, port=port, decode_responses=True)
    disk = DiskTier(client, dsn, window, table=TABLE)
    latencies: list[float] = []
    original = disk.refill

    def timed(sid: str, domains: list[str]) -> int:
        started = time.perf_counter()
        moved = original(sid, domains)
        if moved:
            latencies.append(time.perf_counter() - started)
        return moved

    disk.refill = timed  # type: ignore[method-assign]
    while not stop.is_set():
        if not disk.round(["link"], time.time()):
            time.sleep(0.05)
    out.put(latencies)
    disk.close()


def popper(host: str, port: int, stop: Any, out: Any) -> None:
    """Lease and ack under the default throttle (QUEUE_HITS per QUEUE_WINDOW, moderated), as
    crawlers do, at most POP_RATE a second, until stopped; sends the number leased."""
    frontier = Frontier(redis.Redis(host=host, port=port), lease_timeout=300)
    leased, started = 0, time.monotonic()
    while not stop.is_set():
        got = frontier.pop("link", 100, THROTTLE).leases
        frontier.ack([Ack.of(lease) for lease in got])
        leased += len(got)
        ahead = leased / POP_RATE - (time.monotonic() - started)
        time.sleep(max(ahead, 0.05 if not got else 0.0))
    out.put(leased)


def feed(client: redis.Redis, urls: int, domains: int, window: int) -> dict[str, Any]:
    """Enqueue `urls` children; URLs/s over the enqueue calls and over the wall clock, and the
    Redis CPU time per URL meanwhile (popper and mover included): the figure a busy machine changes least."""
    cpu = _redis_cpu(client)
    frontier = Frontier(client, window=window)
    statuses: Counter[str] = Counter()
    batch: list[Any] = []
    in_calls, started = 0.0, time.perf_counter()
    for request in children(urls, domains):
        batch.append(request)
        if len(batch) == BATCH:
            t = time.perf_counter()
            statuses.update(frontier.enqueue(batch))
            in_calls += time.perf_counter() - t
            batch = []
    if batch:
        statuses.update(frontier.enqueue(batch))
    wall = time.perf_counter() - started
    assert set(statuses) == {"queued"}, statuses
    cpu = _redis_cpu(client) - cpu
    return {
        "enqueue_urls_per_s": round(urls / in_calls),
        "wall_urls_per_s": round(urls / wall),
        "redis_cpu_us_per_url": round(1e6 * cpu / urls, 1),
        "urls_per_redis_cpu_s": round(urls / cpu),
    }


def _redis_cpu(client: redis.Redis) -> float:
    info = client.info("cpu")
    return float(info["used_cpu_user"]) + float(info["used_cpu_sys"])


def run(services: Any, dsn: str, pg: Any, urls: int, domains: int, window: int, tier: bool) -> dict[str, Any]:
    host, port = services.redis.host, services.redis.port
    client = redis.Redis(host=host, port=port)
    client.flushall()
    with pg.cursor() as cur:
        cur.execute(f"DROP TABLE IF EXISTS {TABLE}")
    before = int(client.info("memory")["used_memory"])
    stop, out = multiprocessing.Event(), multiprocessing.Queue()
    workers = [multiprocessing.Process(target=popper, args=(host, port, stop, out))]
    if tier:
        DiskTier(redis.Redis(host=host, port=port, decode_responses=True), dsn, window, table=TABLE).store.conn.close()
        workers.append(multiprocessing.Process(target=mover, args=(host, port, dsn, window, stop, out)))
    for worker in workers:
        worker.start()
    load = os.getloadavg()
    figures = feed(client, urls, domains, window if tier else 0)
    stop.set()
    found = [out.get(timeout=600) for _ in workers]
    for worker in workers:
        worker.join()
    leased = next(v for v in found if isinstance(v, int))
    latencies = next((v for v in found if isinstance(v, list)), [])
    if tier:  # the mover's last drain: nothing left in the stream
        rest = DiskTier(redis.Redis(host=host, port=port, decode_responses=True), dsn, window, table=TABLE)
        with rest.locked("link"):
            rest.drain("link")
        state = rest.figures(["link"])
        rest.close()
    grown = int(client.info("memory")["used_memory"]) - before
    structures = by_structure(client)
    figures.update({
        "tier": tier, "urls": urls, "domains": domains, "leased_meanwhile": leased,
        "load_average_1m_at_start": round(load[0], 1),
        "redis_bytes": grown, "redis_bytes_per_domain": round(grown / domains),
        "redis_bytes_per_url": round(grown / urls, 1),
        "redis_by_structure_bytes_per_domain": {k: round(v / domains) for k, v in sorted(structures.items())},
    })  # fmt: skip
    if tier:
        rows, size = disk_size(pg)
        figures.update({
            "disk_rows": rows, "disk_bytes_per_url": round(size / max(rows, 1), 1), "dry_windows": state["dry"],
            "spilled": state["spilled"], "refilled": state["refilled"], "refills": len(latencies),
            "refill_ms_p50": round(1000 * statistics.median(latencies), 2) if latencies else None,
            "refill_ms_p99": round(1000 * _p99(latencies), 2) if latencies else None,
        })  # fmt: skip
    print({k: v for k, v in figures.items() if k != "redis_by_structure_bytes_per_domain"}, flush=True)
    return figures


def _p99(values: list[float]) -> float:
    return sorted(values)[int(0.99 * (len(values) - 1))]


def disk_size(pg: Any) -> tuple[int, int]:
    """Rows of the tail table and its bytes on disk (every partition with its indexes and TOAST)."""
    with pg.cursor() as cur:
        cur.execute("VACUUM ANALYZE " + TABLE)
        rows = cur.execute(f"SELECT count(*) FROM {TABLE}").fetchone()[0]
        size = cur.execute(f"SELECT sum(pg_total_relation_size(relid)) FROM pg_partition_tree('{TABLE}')").fetchone()[0]
    return int(rows), int(size or 0)


def compare_sqlite(pg: Any, directory: Path, domains: int, samples: int = 300) -> dict[str, Any]:
    """The same rows in SQLite (WITHOUT ROWID, the same key): bytes per URL, and a refill's latency
    (a domain's 50 best selected and deleted, committed) in both stores."""
    path = directory / "tail.sqlite"
    lite = sqlite3.connect(path)
    lite.execute("CREATE TABLE tail (sid TEXT, domain TEXT, score REAL, member TEXT, crawl TEXT, payload TEXT,"
                 " PRIMARY KEY (sid, domain, score, member)) WITHOUT ROWID")  # fmt: skip
    lite.execute("CREATE INDEX tail_crawl ON tail (sid, crawl)")
    with pg.cursor() as cur:
        cur.execute(f"SELECT sid, domain, score, member, crawl, payload FROM {TABLE}")
        while chunk := cur.fetchmany(50_000):
            lite.executemany("INSERT INTO tail VALUES (?, ?, ?, ?, ?, ?)", chunk)
        rows = cur.execute(f"SELECT count(*) FROM {TABLE}").fetchone()[0]
        names = [r[0] for r in cur.execute(f"SELECT DISTINCT domain FROM {TABLE}").fetchall()]
    lite.commit()
    lite.execute("VACUUM")
    picked = random.Random(3).sample(names, min(samples, len(names))) or ["none"]
    lite_ms, pg_ms = [], []
    for domain in picked:
        t = time.perf_counter()
        best = lite.execute("SELECT member FROM tail WHERE sid = 'link' AND domain = ? ORDER BY score, member LIMIT 50",
                            (domain,)).fetchall()  # fmt: skip
        lite.executemany(
            "DELETE FROM tail WHERE sid = 'link' AND domain = ? AND member = ?", [(domain, m) for (m,) in best]
        )
        lite.commit()
        lite_ms.append(1000 * (time.perf_counter() - t))
    pg.autocommit = False
    for domain in picked:
        t = time.perf_counter()
        with pg.cursor() as cur:
            best = cur.execute(f"SELECT member FROM {TABLE} WHERE sid = 'link' AND domain = %s ORDER BY score, member"
                               " LIMIT 50 FOR UPDATE", (domain,)).fetchall()  # fmt: skip
            cur.execute(
                f"DELETE FROM {TABLE} WHERE sid = 'link' AND domain = %s AND member = ANY(%s)",
                (domain, [m for (m,) in best]),
            )
        pg.commit()
        pg_ms.append(1000 * (time.perf_counter() - t))
    pg.autocommit = True
    return {
        "rows": rows, "sqlite_bytes_per_url": round(path.stat().st_size / max(rows, 1), 1),
        "sqlite_refill_ms_p50": round(statistics.median(lite_ms), 2),
        "postgres_refill_ms_p50": round(statistics.median(pg_ms), 2),
    }  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--urls", type=int, default=2_000_000)
    parser.add_argument("--small", type=int, default=200_000, help="the smaller size (same domains)")
    parser.add_argument("--domains", type=int, default=20_000)
    parser.add_argument("--window", type=int, default=100, help="FRONTIER_WINDOW")
    parser.add_argument("--rounds", type=int, default=2, help="interleaved tier / no-tier rounds at --small")
    args = parser.parse_args()
    figures: dict[str, Any] = {"window": args.window, "pop_rate": POP_RATE}
    with tempfile.TemporaryDirectory(prefix="shoal-bench-") as tmp:
        services = start_local_services(Path(tmp), services=("redis",))
        server, root = start_postgres()
        try:
            dsn = tier_dsn(server)
            pg = server.connect()
            rounds = []
            for _ in range(args.rounds):
                on = run(services, dsn, pg, args.small, args.domains, args.window, tier=True)
                off = run(services, dsn, pg, args.small, args.domains, args.window, tier=False)
                rounds.append({"tier": on, "no_tier": off,
                               "ratio": round(on["enqueue_urls_per_s"] / off["enqueue_urls_per_s"], 3)})  # fmt: skip
            figures["rounds"] = rounds
            figures["large"] = run(services, dsn, pg, args.urls, args.domains, args.window, tier=True)
            figures["compare"] = compare_sqlite(pg, Path(tmp), args.domains)
            print(figures["compare"], flush=True)
        finally:
            server.service.stop()
            services.stop_all()
    small, large = rounds[-1]["tier"], figures["large"]
    without_dupe = [f["redis_bytes"] - f["redis_by_structure_bytes_per_domain"].get("dupefilter", 0) * args.domains
                    for f in (small, large)]  # fmt: skip
    # Per domain: its window (window x bytes per URL in Redis, from the run without the tier) plus
    # what a domain costs whatever its depth; at 20,000 domains x 100 and 16 B per URL of dupefilter.
    per_url = rounds[-1]["no_tier"]["redis_bytes_per_url"]
    per_domain = without_dupe[1] / args.domains
    fixed = max(per_domain - args.window * per_url, 0)
    figures["projected_redis_gib_at_20M"] = round((20_000 * (fixed + 100 * per_url) + 16 * 20_000_000) / 2**30, 2)
    figures["redis_bytes_without_dupefilter"] = {"small": without_dupe[0], "large": without_dupe[1]}
    figures["load_average"] = [round(v, 1) for v in os.getloadavg()]
    checks = {
        "Redis grows with domains, not URLs (4x URLs: < 1.25x bytes, dupefilter aside)": without_dupe[1]
        < 1.25 * without_dupe[0],
        "Redis < 1 GiB at 20 M URLs over 20,000 domains (projected)": figures["projected_redis_gib_at_20M"] < 1.0,
        "enqueue with the tier >= 0.9x without (interleaved rounds)": min(r["ratio"] for r in rounds) >= 0.9,
        "no window ran dry while its tail was on disk": all(r["tier"]["dry_windows"] == 0 for r in rounds)
        and large["dry_windows"] == 0,
    }
    figures["enqueue_ratio_tier_over_none"] = [r["ratio"] for r in rounds]
    print_checks(checks)
    write_result("frontier_tier", figures, checks)
    shutil.rmtree(root, ignore_errors=True)
    return 0 if all(checks.values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
