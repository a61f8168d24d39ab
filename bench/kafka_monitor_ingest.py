"""Kafka monitor ingest: crawl requests per second one monitor process moves from Kafka into Redis.

Target (DESIGN.md, issue 37): >= 20,000 requests/s per process at the default LOG_LEVEL (INFO);
Scrapy Cluster backlogged at ~70/s (its issue #221). The benchmark starts its own Redis and broker
on free ports in a temporary directory, fills the incoming topic with N distinct crawl requests
(1,000 domains, 10 crawls), then times one in-process monitor from its first batch to its last
commit, and checks every request was queued. It runs at LOG_LEVEL=WARNING and at LOG_LEVEL=INFO
(one JSON "Added crawl to Redis" line per batch with its counts per appid and crawlid; the line
per request is DEBUG's), logging to stdout redirected to a file as under supervisord, `--repeat`
times each (default 3), and reports the median. Besides wall-clock requests/s it reports requests
per CPU-second of the monitor process, which other load on the machine barely changes. Redis runs
without its append-only file (its rewrites would take a core at random moments).

`--idle SECONDS` measures instead a real `shoal kafka-monitor` process with nothing to read: its
CPU % of one core from /proc (utime+stime) over the window, the broker's apart, then how long a
request sent to it then takes to be queued (issue 37: all of a node's Shoal processes <= 2 %).

    .venv/bin/python -m bench.kafka_monitor_ingest [--messages N] [--repeat R] [--profile] [-s NAME=VALUE]
    .venv/bin/python -m bench.kafka_monitor_ingest --idle 60

Prints the figures and writes bench/results/kafka_monitor_ingest.json (or kafka_monitor_idle.json).
"""

from __future__ import annotations

import argparse
import cProfile
import json
import logging
import os
import platform
import pstats
import subprocess
import sys
import tempfile
import time
import uuid
from contextlib import redirect_stdout
from pathlib import Path
from typing import Any, TextIO

import ujson

from utils.config.clients import ensure_topics, redis_client
from utils.config.log import setup_logging
from utils.config.settings import Settings
from utils.frontier import keys
from utils.services import LocalServices, start_local_services

RESULTS = Path(__file__).resolve().parent / "results"
REPO = Path(__file__).resolve().parents[1]
TICKS = os.sysconf("SC_CLK_TCK")
TARGET = 20_000  # requests/s per process (DESIGN.md)
DOMAINS = 1000
CRAWLS = 10
LEVELS = ("WARNING", "INFO")


def settings_for(services: LocalServices, log_level: str, extra: dict[str, Any]) -> Settings:
    tag = uuid.uuid4().hex[:8]
    return Settings.load(
        environ={},
        overrides={
            "REDIS_HOST": services.redis.host,
            "REDIS_PORT": services.redis.port,
            "KAFKA_HOSTS": [services.broker.address],
            "KAFKA_TOPIC_PREFIX": f"bench{tag}",
            "KAFKA_GROUP": f"bench{tag}",
            "LOG_LEVEL": log_level,
            "STATS_DUMP": 0,
            **extra,
        },
    )


def request(i: int) -> dict[str, Any]:
    return {
        "url": f"http://www.site{i % DOMAINS}.example.com/section/{i // DOMAINS}/page-{i}.html",
        "appid": "bench",
        "crawlid": f"crawl{i % CRAWLS}",
        "priority": 1 + i % 100,
    }


def fill(settings: Settings, count: int) -> float:
    """Produce `count` requests to the incoming topic; returns the seconds it took."""
    began = time.perf_counter()
    topic = settings.incoming_topic
    try:
        from confluent_kafka import Producer  # fast (librdkafka); a test dependency
    except ImportError:
        from kafka import KafkaProducer

        producer = KafkaProducer(bootstrap_servers=settings.get_list("KAFKA_HOSTS"), linger_ms=20)
        for i in range(count):
            producer.send(topic, ujson.dumps(request(i)).encode())
        producer.flush(120)
        producer.close()
        return time.perf_counter() - began
    fast = Producer({"bootstrap.servers": settings.get_list("KAFKA_HOSTS")[0], "linger.ms": 20})
    for i in range(count):
        fast.produce(topic, ujson.dumps(request(i)).encode())
        if i % 10_000 == 0:
            fast.poll(0)
    if fast.flush(120):
        raise RuntimeError("the broker did not confirm every benchmark message")
    return time.perf_counter() - began


def ingest(settings: Settings, count: int, profile: bool) -> dict[str, Any]:
    """Time one monitor over `count` messages; check they were all queued."""
    from kafka_monitor.monitor import KafkaMonitor  # after setup_logging: the monitor reads the level

    monitor = KafkaMonitor.from_settings(settings)
    profiler = cProfile.Profile() if profile else None
    handled, began, cpu_began, batches = 0, 0.0, 0.0, 0
    deadline = time.monotonic() + 600
    while handled < count and time.monotonic() < deadline:
        n = monitor.run_once()
        if n and not began:
            began, cpu_began = time.perf_counter(), time.process_time()  # the group is joined
            if profiler:
                profiler.enable()
        handled += n
        batches += 1 if n else 0
    elapsed, cpu = time.perf_counter() - began, time.process_time() - cpu_began
    if profiler:
        profiler.disable()
        pstats.Stats(profiler).sort_stats("tottime").print_stats(25)
    monitor.close()
    queued = _queued(settings)
    return {
        "messages": handled,
        "queued": queued,
        "seconds": round(elapsed, 3),
        "batches": batches,
        "requests_per_s": round(handled / elapsed) if elapsed else 0,
        "requests_per_cpu_s": round(handled / cpu) if cpu else 0,  # what the monitor's own core does
    }


def _queued(settings: Settings) -> int:
    client = redis_client(settings)
    pipe = client.pipeline(transaction=False)
    for c in range(CRAWLS):
        pipe.hget(keys.crawl_progress("link", "bench", f"crawl{c}"), "enqueued")
    return sum(int(v or 0) for v in pipe.execute())


def one_run(settings: Settings, count: int, profile: bool, log_file: TextIO) -> dict[str, Any]:
    """Fill the topic, then time the monitor; its log goes to `log_file` (stdout under supervisord)."""
    with redirect_stdout(log_file):
        setup_logging(settings, component="kafka-monitor")  # not a rotating file: it formats lines twice
    client = redis_client(settings)
    client.flushdb()  # each run starts from an empty Redis
    # No append-only file: its background rewrites would take one of the two cores at random
    # moments; this measures the monitor, not Redis's disk.
    client.config_set("appendonly", "no")
    try:
        ensure_topics(settings, [settings.incoming_topic])
        produce_s = fill(settings, count)
        result = ingest(settings, count, profile)
    finally:
        logging.getLogger().handlers[:] = [logging.StreamHandler(sys.stderr)]
    result["produce_seconds"] = round(produce_s, 3)
    level = settings.get_str("LOG_LEVEL")
    if result["queued"] != count:
        raise RuntimeError(f"{level}: {result['queued']} of {count} requests were queued")
    print(f"LOG_LEVEL={level}: {result['requests_per_s']:,} crawl requests/s ({count:,} in {result['seconds']} s; "
          f"{result['requests_per_cpu_s']:,} per CPU-second of the monitor)", flush=True)  # fmt: skip
    return result


def run(count: int, profile: bool, repeat: int, overrides: dict[str, Any]) -> dict[str, Any]:
    """`repeat` runs per log level (the machine is shared: the median is reported, every run kept)."""
    figures: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="shoal-bench-km-") as tmp:
        run_dir = Path(tmp)
        with start_local_services(run_dir / "services", services=["redis", "kafka"]) as services:
            for level in LEVELS:
                runs = []
                for attempt in range(repeat):
                    settings = settings_for(services, level, overrides)
                    with open(run_dir / f"kafka-monitor-{level}-{attempt}.log", "w") as log_file:
                        runs.append(one_run(settings, count, profile, log_file))
                figures[f"log_{level.lower()}"] = {
                    "requests_per_s": _median(r["requests_per_s"] for r in runs),
                    "requests_per_cpu_s": _median(r["requests_per_cpu_s"] for r in runs),
                    "runs": runs,
                }
    return figures


def cpu_seconds(pid: int) -> float:
    """utime + stime of a process, its threads included, from /proc/<pid>/stat."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def idle_cpu(seconds: float = 60.0, settle: float = 10.0, wakes: int = 10) -> dict[str, float]:
    """% of one core a `shoal kafka-monitor` process spends with nothing to read (default settings,
    INFO), the broker's own figure apart, then how long a request sent to the idle monitor takes to
    be queued in Redis (`wakes` of them, 1 s apart: a longer idle wait must not delay the first).
    The monitor is a real process (metrics server included), measured from /proc once it has
    joined its group and `settle` seconds have passed."""
    with (
        tempfile.TemporaryDirectory(prefix="shoal-bench-km-idle-") as tmp,
        start_local_services(Path(tmp) / "services", services=["redis", "kafka"]) as services,
    ):
        settings = settings_for(services, "INFO", {})
        log_path = Path(tmp) / "kafka-monitor.log"
        with open(log_path, "wb") as log_file:
            argv = [sys.executable, "-m", "utils.cli.main", "kafka-monitor"]
            env = _monitor_environ(settings)
            proc = subprocess.Popen(argv, cwd=REPO, env=env, stdout=log_file, stderr=subprocess.STDOUT)
            try:
                _wait_joined(log_path, proc)
                time.sleep(settle)
                pids = {"kafka_monitor": proc.pid, "broker": services.broker.pid or 0}
                before, began = {name: cpu_seconds(pid) for name, pid in pids.items()}, time.monotonic()
                time.sleep(seconds)
                after, window = {name: cpu_seconds(pid) for name, pid in pids.items()}, time.monotonic() - began
                latencies = wake_latencies(settings, wakes)
            finally:
                proc.terminate()
                proc.wait(30)
    figures = {f"{name}_percent": round(100 * (after[name] - before[name]) / window, 2) for name in pids}
    return {**figures, "wake_p50_ms": round(1000 * sorted(latencies)[len(latencies) // 2], 1),
            "wake_max_ms": round(1000 * max(latencies), 1)}  # fmt: skip


def wake_latencies(settings: Settings, count: int) -> list[float]:
    """Seconds from producing one request to an idle monitor until Redis counts it queued."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": settings.get_list("KAFKA_HOSTS")[0], "linger.ms": 0})
    latencies = []
    for i in range(count):
        time.sleep(1.0)  # idle again
        queued = _queued(settings)
        began = time.perf_counter()
        producer.produce(settings.incoming_topic, ujson.dumps(request(i)).encode())
        producer.flush(10)
        while _queued(settings) == queued:
            if time.perf_counter() - began > 30:
                raise RuntimeError("a request to the idle monitor was not queued within 30 s")
            time.sleep(0.001)
        latencies.append(time.perf_counter() - began)
    return latencies


def _monitor_environ(settings: Settings) -> dict[str, str]:
    """The environment of a monitor process with the bench's `settings`, every other setting its default."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SHOAL_")}
    for name in ("REDIS_HOST", "REDIS_PORT", "KAFKA_TOPIC_PREFIX", "KAFKA_GROUP"):
        env[f"SHOAL_{name}"] = settings.get_str(name)
    env["SHOAL_KAFKA_HOSTS"] = settings.get_list("KAFKA_HOSTS")[0]
    return env


def _wait_joined(log_path: Path, proc: subprocess.Popen[bytes], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while b"Partitions assigned" not in log_path.read_bytes():
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"the kafka monitor never joined its group:\n{log_path.read_text()[-3000:]}")
        time.sleep(0.2)


def _median(values: Any) -> int:
    ordered = sorted(values)
    return int(ordered[len(ordered) // 2])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=3, help="runs per log level; the median is reported")
    parser.add_argument("--profile", action="store_true", help="print where the monitor's time goes")
    parser.add_argument("-s", "--set", action="append", default=[], metavar="NAME=VALUE", help="a setting")
    parser.add_argument("--idle", type=float, metavar="SECONDS", help="only measure the idle monitor's CPU")
    args = parser.parse_args()
    if args.idle:
        idle = idle_cpu(args.idle)
        RESULTS.mkdir(exist_ok=True)
        (RESULTS / "kafka_monitor_idle.json").write_text(json.dumps({"seconds": args.idle, **idle}, indent=2) + "\n")
        print(f"idle kafka monitor: {idle['kafka_monitor_percent']} % of one core over {args.idle:g} s "
              f"(broker apart: {idle['broker_percent']} %); a request to it queued in {idle['wake_p50_ms']} ms "
              f"(p50, max {idle['wake_max_ms']} ms)")  # fmt: skip
        return
    overrides = dict(pair.split("=", 1) for pair in args.set)
    figures = run(args.messages, args.profile, args.repeat, overrides)
    best = figures["log_warning"]["requests_per_s"]
    result = {
        "benchmark": "kafka_monitor_ingest",
        "target_requests_per_s": TARGET,
        "requests_per_s": best,
        "requests_per_s_log_info": figures["log_info"]["requests_per_s"],
        "requests_per_cpu_s": figures["log_warning"]["requests_per_cpu_s"],
        "requests_per_cpu_s_log_info": figures["log_info"]["requests_per_cpu_s"],
        "meets_target": best >= TARGET,
        "runs": figures,
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "platform": platform.platform(),
            "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        },
    }
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "kafka_monitor_ingest.json").write_text(json.dumps(result, indent=2) + "\n")
    print(f"kafka monitor ingest: {best:,} requests/s at WARNING, "
          f"{result['requests_per_s_log_info']:,} at INFO (target {TARGET:,})")  # fmt: skip


if __name__ == "__main__":
    main()
