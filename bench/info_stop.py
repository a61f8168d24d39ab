"""(g) info and stop on a crawl of 1,000 requests while 1,000,000 requests of other crawls are queued.

Scrapy Cluster decoded every queued request of the spider for each info or stop (its issue #53:
hours at 1M queued); Shoal reads the crawl's own index, so the cost should not depend on the
backlog. The backlog is queued through the frontier's own enqueue script (100 crawls over 200
domains, which the measured crawls share), then each request goes through a real redis monitor:
job in the stream -> plugin -> answer confirmed by the broker -> job acknowledged. Figures: the
plugin's own time and the whole round, in ms. Target: < 100 ms each.
Run: `python -m bench.info_stop [--background N]`.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Any

from bench.common import bench_cluster, percentile, write_result
from redis_monitor.monitor import RedisMonitor
from utils.config.clients import redis_client
from utils.frontier import Frontier, NewRequest, crawl_request, keys
from utils.jobs.stream import add_job

BATCH = 5000  # requests per enqueue call
DOMAINS = 200
OTHER_CRAWLS = 100
CRAWL_SIZE = 1000
MEASURED_CRAWLS = 5  # each is stopped once
INFO_ROUNDS = 20
TARGET_MS = 100.0


def request(i: int, crawlid: str) -> NewRequest:
    domain = f"site{i % DOMAINS}.example.com"
    url = f"http://www.{domain}/articles/section-{i % 97}/story-{i}.html"
    record = crawl_request.to_record({"url": url, "appid": "benchapp", "crawlid": crawlid, "spiderid": "link",
                                      "priority": 1 + i % 50, "maxdepth": 3, "curdepth": 1})  # fmt: skip
    return NewRequest("link", domain, record["priority"], "benchapp", crawlid, fingerprint=None, seed=True,
                      **crawl_request.encode(record)._asdict())  # fmt: skip


def fill(frontier: Frontier, count: int, crawlid_of: Callable[[int], str]) -> float:
    """Queue `count` requests; returns the seconds it took."""
    started = time.monotonic()
    for start in range(0, count, BATCH):
        frontier.enqueue([request(i, crawlid_of(i)) for i in range(start, min(count, start + BATCH))])
    return time.monotonic() - started


def timed_plugins(monitor: RedisMonitor, times: dict[str, list[float]]) -> None:
    """Record each job plugin's own time per job (ms), by wrapping its handle."""
    for plugin in monitor.job_plugins:
        name, handle = type(plugin).__name__, plugin.handle

        def timed(job: Any, _name: str = name, _handle: Any = handle) -> Any:
            started = time.perf_counter()
            try:
                return _handle(job)
            finally:
                times.setdefault(_name, []).append((time.perf_counter() - started) * 1000)

        plugin.handle = timed


def round_trip(monitor: RedisMonitor, request: dict[str, Any]) -> float:
    """ms from the job's arrival in the stream to its answer confirmed and the job acknowledged."""
    client = monitor.redis
    started = time.perf_counter()
    pipe = client.pipeline(transaction=False)
    add_job(pipe, "action", request, f"bench/{request['uuid']}")
    pipe.execute()
    while client.xlen(keys.JOBS):
        monitor.run_once()
    return (time.perf_counter() - started) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--background", type=int, default=1_000_000, help="queued requests of other crawls")
    args = parser.parse_args()
    with bench_cluster() as cluster:
        settings = cluster.settings.copy_with(REDIS_SOCKET_TIMEOUT=60.0)
        frontier = Frontier(redis_client(settings, decode=True))
        fill_s = fill(frontier, args.background, lambda i: f"other{i % OTHER_CRAWLS}")
        for n in range(MEASURED_CRAWLS):
            fill(frontier, CRAWL_SIZE, lambda _i, n=n: f"measured{n}")
        monitor = RedisMonitor.from_settings(settings)
        plugin_ms: dict[str, list[float]] = {}
        timed_plugins(monitor, plugin_ms)
        monitor.run_once()  # warm-up: stream group, scripts, producer metadata
        base = {"appid": "benchapp", "spiderid": "link", "crawlid": "measured0"}
        info_ms = [round_trip(monitor, {**base, "action": "info", "uuid": f"info{i}"}) for i in range(INFO_ROUNDS)]
        stop_ms = [round_trip(monitor, {**base, "action": "stop", "crawlid": f"measured{n}", "uuid": f"stop{n}"})
                   for n in range(MEASURED_CRAWLS)]  # fmt: skip
        backlog = sum(monitor.redis.zcard(keys.queue("link", f"site{d}.example.com")) for d in range(DOMAINS))
        monitor.close()
    figures = {
        "background_queued": backlog,
        "crawl_requests": CRAWL_SIZE,
        "fill_requests_per_s": round((args.background + MEASURED_CRAWLS * CRAWL_SIZE) / fill_s),
        "info_plugin_ms_p50": round(percentile(plugin_ms["InfoMonitor"], 50), 2),
        "info_plugin_ms_max": round(max(plugin_ms["InfoMonitor"]), 2),
        "info_round_ms_p50": round(percentile(info_ms, 50), 2),
        "info_round_ms_max": round(max(info_ms), 2),
        "stop_plugin_ms_p50": round(percentile(plugin_ms["StopMonitor"], 50), 2),
        "stop_plugin_ms_max": round(max(plugin_ms["StopMonitor"]), 2),
        "stop_round_ms_p50": round(percentile(stop_ms, 50), 2),
        "stop_round_ms_max": round(max(stop_ms), 2),
    }
    checks = {
        "info < 100 ms at 1M queued": figures["info_round_ms_p50"] < TARGET_MS,
        "stop < 100 ms at 1M queued": figures["stop_round_ms_p50"] < TARGET_MS,
        "stop leaves the other crawls' requests": backlog == args.background,
    }
    path = write_result("info_stop", figures, checks)
    for name, value in figures.items():
        print(f"{name:>24}: {value}")
    for name, ok in checks.items():
        print(f"{name:>40}: {'yes' if ok else 'NO'}")
    print(f"written: {path}")


if __name__ == "__main__":
    main()
