"""Issue 12: the scheduler's frontier operations per second, one Redis against a three-master Redis Cluster.

Several worker processes each drive the real `utils.frontier.Frontier` the way a crawler's scheduler
does: seed a crawl over many domains, then repeat `settle_and_pop` (the links found on the pages of
the previous leases, their acks, and the next pop, in one round trip) for a fixed time. An operation
is a request enqueued, a lease popped or an ack; the same load runs against one redis-server and
against the cluster (REDIS_CLUSTER = true, through the project's own client factory), in one run.
A side that fails (a frontier script touching keys of several cluster slots) is reported in the
JSON as an error, not raised. Run: `python -m bench.scheduler_ops [--workers 3] [--seconds 5]`.
"""

from __future__ import annotations

import argparse
import multiprocessing
import tempfile
import time
import uuid
from dataclasses import asdict, dataclass
from multiprocessing.synchronize import Barrier
from pathlib import Path
from typing import Any

from bench.common import print_checks, write_result
from utils.config.clients import redis_client
from utils.config.settings import Settings, default_values
from utils.frontier import Ack, Frontier, Lease, NewRequest, Settlement, ThrottlePolicy, crawl_request
from utils.frontier.fingerprint import fingerprint
from utils.services import start_local_services
from utils.services.redis_cluster import start_redis_cluster

SPIDER = "link"
DOMAINS = 200  # distinct domains per worker's crawl: the pop script scans domain heads
SEED = 2000  # requests each worker queues before the clock starts
LINKS_PER_PAGE = 2  # found links written back per leased page: the queue grows slowly, never drains
START_TIMEOUT = 60.0  # seconds every worker has to connect and seed before the barrier breaks
_DEFAULTS = Settings(default_values())
POP_BATCH = _DEFAULTS.get_int("SCHEDULER_POP_BATCH")  # as a crawler pops
SCAN_LIMIT = _DEFAULTS.get_int("SCHEDULER_SCAN_LIMIT")
UNTHROTTLED = ThrottlePolicy(hits=0)  # the benchmark measures Redis, not the throttle's waits


@dataclass
class Tally:
    """One worker's operations inside the timed window, or why it stopped."""

    enqueued: int = 0
    popped: int = 0
    acked: int = 0
    round_trips: int = 0
    seconds: float = 0.0
    error: str = ""

    @property
    def ops(self) -> int:
        return self.enqueued + self.popped + self.acked


class Links:
    """Unique child requests of one worker's crawl, spread round-robin over DOMAINS domains."""

    def __init__(self, crawlid: str) -> None:
        self.crawlid = crawlid
        self.count = 0

    def take(self, n: int) -> list[NewRequest]:
        start, self.count = self.count, self.count + n
        return [self._request(i) for i in range(start, start + n)]

    def _request(self, i: int) -> NewRequest:
        domain = f"site{i % DOMAINS}.{self.crawlid}.example.com"
        url = f"http://{domain}/articles/section-{i % 97}/story-{i}.html"
        record = crawl_request.to_record({"url": url, "appid": "bench", "crawlid": self.crawlid, "spiderid": SPIDER,
                                          "priority": -1, "maxdepth": 3, "curdepth": 1})  # fmt: skip
        return NewRequest(SPIDER, domain, -1, "bench", self.crawlid, fingerprint=fingerprint(url),
                          **crawl_request.encode(record)._asdict())


def _cycle(frontier: Frontier, links: Links, held: list[Lease], tally: Tally) -> list[Lease]:
    """One scheduler round trip: the previous leases' links and acks, then the next pop."""
    batch = Settlement(requests=links.take(LINKS_PER_PAGE * len(held)), acks=[Ack.of(lease) for lease in held])
    out, popped = frontier.settle_and_pop(batch, SPIDER, POP_BATCH, UNTHROTTLED, SCAN_LIMIT)
    tally.enqueued += len(out["requests"])
    tally.acked += out["acks"].count("acked")
    tally.popped += len(popped.leases)
    return popped.leases


def _drive(settings: Settings, barrier: Barrier, seconds: float, tally: Tally) -> None:
    frontier = Frontier.from_settings(settings, redis_client(settings, ping=True))
    links = Links(f"ops{uuid.uuid4().hex[:6]}")
    for _ in range(0, SEED, 500):
        frontier.enqueue(links.take(500))
    barrier.wait(START_TIMEOUT)
    began = time.monotonic()
    trips = frontier.round_trips
    held: list[Lease] = []
    while time.monotonic() - began < seconds:
        held = _cycle(frontier, links, held, tally)
    tally.seconds = time.monotonic() - began
    tally.round_trips = frontier.round_trips - trips


def worker(settings: Settings, barrier: Barrier, seconds: float, results: Any) -> None:
    """A process's whole run; any failure (a cluster error) comes back as the tally's error."""
    tally = Tally()
    try:
        _drive(settings, barrier, seconds, tally)
    except Exception as exc:  # reported, not raised: the other side of the comparison still runs
        tally.error = f"{type(exc).__name__}: {exc}"
        barrier.abort()  # the others stop waiting at once if this one failed while seeding
    results.put(asdict(tally))


def measure(settings: Settings, workers: int, seconds: float) -> dict[str, Any]:
    """Run `workers` processes against the Redis of `settings`; totals, rate and the first error."""
    ctx = multiprocessing.get_context("spawn")
    barrier, results = ctx.Barrier(workers), ctx.Queue()
    procs = [ctx.Process(target=worker, args=(settings, barrier, seconds, results)) for _ in range(workers)]
    for proc in procs:
        proc.start()
    tallies = [Tally(**results.get(timeout=START_TIMEOUT + seconds + 30)) for _ in procs]
    for proc in procs:
        proc.join(10)
    failed = [t.error for t in tallies if t.error]
    if failed:  # the cause first: the workers it stopped at the barrier only say BrokenBarrierError
        causes = [e for e in failed if not e.startswith("BrokenBarrierError")] or failed
        return {"error": causes[0][:500], "errors": len(failed)}
    elapsed = max(t.seconds for t in tallies)
    total = {name: sum(getattr(t, name) for t in tallies) for name in ("enqueued", "popped", "acked", "round_trips")}
    ops = sum(t.ops for t in tallies)
    return {
        **total,
        "ops": ops,
        "ops_per_s": round(ops / elapsed),
        "round_trips_per_s": round(total["round_trips"] / elapsed),
    }


def _settings(host: str, port: int, cluster: bool) -> Settings:
    return Settings(default_values()).copy_with(REDIS_HOST=host, REDIS_PORT=port, REDIS_CLUSTER=cluster, REDIS_DB=0)


def run(workers: int, seconds: float) -> dict[str, dict[str, Any]]:
    """Both sides in one run, each on services of its own in a temporary directory."""
    sides: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="shoal-bench-") as tmp:
        single = start_local_services(Path(tmp) / "single", services=("redis",))
        try:
            sides["single"] = measure(_settings(single.redis.host, single.redis.port, False), workers, seconds)
        finally:
            single.stop_all()
        cluster = start_redis_cluster(Path(tmp) / "cluster")
        try:
            sides["cluster"] = measure(_settings(cluster.host, cluster.port, True), workers, seconds)
        finally:
            cluster.stop()
    return sides


def figures_of(sides: dict[str, dict[str, Any]], workers: int, seconds: float) -> dict[str, Any]:
    """Both sides' totals, their rates side by side, and cluster/single (None while a side failed)."""
    single, cluster = sides["single"], sides["cluster"]
    ratio = None
    if "ops_per_s" in single and "ops_per_s" in cluster:
        ratio = round(cluster["ops_per_s"] / single["ops_per_s"], 2)
    return {
        "workers": workers,
        "seconds": seconds,
        "single": single,
        "cluster": cluster,
        "single_ops_per_s": single.get("ops_per_s"),
        "cluster_ops_per_s": cluster.get("ops_per_s"),
        "ratio_cluster_to_single": ratio,
    }


def _line(name: str, side: dict[str, Any]) -> str:
    if "error" in side:
        return f"  {name:<8} ERROR ({side['errors']} workers): {side['error'][:160]}"
    return (f"  {name:<8} {side['ops_per_s']:>9,} ops/s  (enqueued {side['enqueued']:,}, popped {side['popped']:,}, "
            f"acked {side['acked']:,}; {side['round_trips_per_s']:,} round trips/s)")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--workers", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=5.0)
    args = parser.parse_args()
    sides = run(args.workers, args.seconds)
    figures = figures_of(sides, args.workers, args.seconds)
    checks = {"single Redis measured": "error" not in sides["single"],
              "Redis Cluster measured": "error" not in sides["cluster"]}  # fmt: skip
    path = write_result("scheduler_ops", figures, checks)
    print(f"Frontier operations/s, {args.workers} worker processes x {args.seconds:g} s each:")
    print(_line("single", sides["single"]))
    print(_line("cluster", sides["cluster"]))
    print(f"  cluster/single = {figures['ratio_cluster_to_single']}  -> {path}")
    print_checks(checks)


if __name__ == "__main__":
    main()
