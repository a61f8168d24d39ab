"""Quota flood: one app's flood over its queued quota, answered and refused, while another app queues.

Target (issue 42): a flood of 1,000,000 requests from one app over its `max_queued` quota is answered
and refused at >= 20,000 requests/s, while another app's requests, mixed in, are queued normally.
The benchmark starts its own Redis and broker on free ports, puts the quotas where the redis
monitors copy them (`shoal:apps:quotas`) with the flooding app already at its quota, and for each
run fills a fresh incoming topic (KAFKA_TOPIC_PARTITIONS partitions) with N requests (one in
OTHER_EVERY from the other app, the rest from the flood). Each run is a consumer group of M kafka
monitor processes (`--monitors`, default 1 and 2 in turn, rounds interleaved: other load on the
machine comes and goes), each at LOG_LEVEL=INFO (the default): they join the group (their
partitions paused while the topic fills), then read it together; the run is timed from the first
batch any of them completes to the last batch completed, and their CPU is summed (requests per
CPU-second is the figure other load on the machine barely moves). It checks that no flood request
was queued, that every one of them was answered as refused (the answers' counts add up, read back
from the outbound topic), and that every request of the other app was queued. `--uuid` gives each
flood request a uuid: then each is answered on its own (N answers), not once per crawl and batch.

    .venv/bin/python -m bench.quota_flood [--messages N] [--monitors M ...] [--rounds R] [--uuid]

Prints the figures and writes bench/results/quota_flood.json.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import statistics
import tempfile
import time
from contextlib import redirect_stdout
from pathlib import Path
from typing import Any

import ujson

from bench.common import print_checks, write_result
from utils.apps import mirror
from utils.apps.quotas import Quotas
from utils.config.clients import ensure_topics, redis_client
from utils.config.log import setup_logging
from utils.config.settings import Settings
from utils.frontier import keys
from utils.services import start_local_services

TARGET = 20_000  # requests/s per process (issue 42)
OTHER_EVERY = 100  # one request in this many is the other app's
QUOTA = 1000  # the flooding app's max_queued, already reached


def request(i: int, uuid: bool) -> dict[str, Any]:
    if i % OTHER_EVERY == 0:
        return {"url": f"http://127.0.{i % 250}.{1 + i // 250 % 250}/other/{i}", "appid": "steady", "crawlid": "s1"}
    flood: dict[str, Any] = {"url": f"http://127.1.{i % 250}.1/flood/{i}", "appid": "flood", "crawlid": "f1"}
    if uuid:
        flood["uuid"] = f"f{i}"
    return flood


def fill(settings: Settings, count: int, uuid: bool) -> float:
    from confluent_kafka import Producer  # fast (librdkafka); a test dependency

    began = time.perf_counter()
    producer = Producer({"bootstrap.servers": settings.get_list("KAFKA_HOSTS")[0], "linger.ms": 20})
    for i in range(count):
        value = ujson.dumps(request(i, uuid)).encode()
        while True:
            try:
                producer.produce(settings.incoming_topic, value)
                break
            except BufferError:  # librdkafka's queue is full: let the broker catch up
                producer.poll(0.1)
        if i % 10_000 == 0:
            producer.poll(0)
    if producer.flush(120):
        raise RuntimeError("the broker did not confirm every benchmark message")
    return time.perf_counter() - began


def member(overrides: dict[str, Any], log_path: str, ready: Any, go: Any, stop: Any, handled: Any, out: Any) -> None:
    """One monitor of the group, in its own process: join, wait for the filled topic, read until told."""
    settings = Settings.load(environ={}, overrides=overrides)
    with open(log_path, "w") as log_file, redirect_stdout(log_file):
        setup_logging(settings, component="kafka-monitor")  # stdout as under supervisord
        from kafka_monitor.monitor import KafkaMonitor  # after setup_logging: the monitor reads the level

        monitor = KafkaMonitor.from_settings(settings)
        while not monitor.consumer.assignment():
            monitor.run_once(idle_ms=100)
        monitor.partitions.set_paused("bench", True)  # in the group, reading nothing while the topic fills
        ready.put(len(monitor.consumer.assignment()))
        while not go.wait(0.2):
            monitor.partitions.idle_poll(0.1)
        monitor.partitions.set_paused("bench", False)
        first = last = cpu_first = cpu_last = 0.0
        mine = 0
        while not stop.is_set():
            n = monitor.run_once()
            if not n:
                continue
            now, cpu = time.monotonic(), time.process_time()
            if not first:
                first, cpu_first = now, cpu
            last, cpu_last, mine = now, cpu, mine + n
            with handled.get_lock():
                handled.value += n
        monitor.close()
    out.put({"first": first, "last": last, "cpu": cpu_last - cpu_first, "handled": mine})


def timed_group(overrides: dict[str, Any], settings: Settings, count: int, uuid: bool, monitors: int,
                run_dir: Path) -> tuple[float, float, float, list[dict[str, Any]]]:  # fmt: skip
    """(fill seconds, seconds, CPU-seconds) of `monitors` monitors over `count` messages, and each one's share."""
    context = multiprocessing.get_context("spawn")  # never forked from a process with librdkafka's threads
    ready, out, go, stop = context.Queue(), context.Queue(), context.Event(), context.Event()
    handled = context.Value("q", 0)
    processes = [context.Process(target=member, args=(overrides, str(run_dir / f"kafka-monitor-{i}.log"), ready, go,
                                                      stop, handled, out)) for i in range(monitors)]  # fmt: skip
    for process in processes:
        process.start()
    try:
        for _ in processes:
            ready.get(timeout=180)
        produce_s = fill(settings, count, uuid)
        go.set()
        deadline = time.monotonic() + 900
        while handled.value < count and time.monotonic() < deadline:
            time.sleep(0.05)
        stop.set()
        shares = [out.get(timeout=120) for _ in processes]
    finally:
        stop.set()
        for process in processes:
            process.join(30)
            if process.is_alive():
                process.kill()
    if handled.value < count:
        raise RuntimeError(f"only {handled.value} of {count} messages handled in time")
    seconds = max(s["last"] for s in shares) - min(s["first"] for s in shares if s["first"])
    return produce_s, seconds, sum(s["cpu"] for s in shares), shares


def answers(settings: Settings, expected_refused: int) -> dict[str, int]:
    """Refused requests and queued acknowledgements counted from the outbound topic."""
    from confluent_kafka import Consumer

    consumer = Consumer({"bootstrap.servers": settings.get_list("KAFKA_HOSTS")[0], "group.id": "bench-reader",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})  # fmt: skip
    consumer.subscribe([settings.topic("outbound_firehose")])
    found = {"refused": 0, "refusal_answers": 0, "other": 0}
    deadline = time.monotonic() + 120
    while found["refused"] < expected_refused and time.monotonic() < deadline:
        for message in consumer.consume(num_messages=10_000, timeout=0.5):
            if message.error():
                continue
            answer = ujson.loads(message.value())
            if answer.get("status") == "refused" and answer.get("quota") == "max_queued":
                found["refused"] += answer.get("count", 1)
                found["refusal_answers"] += 1
            else:
                found["other"] += 1
    consumer.close()
    return found


def queued(settings: Settings, appid: str, crawlid: str) -> int:
    value = redis_client(settings).hget(keys.crawl_progress("link", appid, crawlid), "enqueued")
    return int(value or 0)


def run(services: Any, run_dir: Path, count: int, uuid: bool, monitors: int) -> dict[str, Any]:
    tag = f"{monitors}m{time.monotonic_ns() % 10**8}"
    overrides = {"REDIS_HOST": services.redis.host, "REDIS_PORT": services.redis.port,
                 "KAFKA_HOSTS": [services.broker.address], "KAFKA_TOPIC_PREFIX": f"flood{tag}",
                 "KAFKA_GROUP": f"flood{tag}", "LOG_LEVEL": "INFO", "STATS_DUMP": 0}  # fmt: skip
    settings = Settings.load(environ={}, overrides=overrides)
    client = redis_client(settings)
    client.flushdb()  # each run from an empty Redis
    client.config_set("appendonly", "no")  # as bench/kafka_monitor_ingest.py: measure the monitor
    mirror.write(client, Quotas.parse(f"apps: {{flood: {{max_queued: {QUOTA}}}}}"))
    client.hset(keys.APPS_QUEUED, "flood", QUOTA)
    ensure_topics(settings, [settings.incoming_topic])
    produce_s, seconds, cpu, shares = timed_group(overrides, settings, count, uuid, monitors, run_dir)
    other = len(range(0, count, OTHER_EVERY))
    flood = count - other
    found = answers(settings, flood)
    load = Path("/proc/loadavg").read_text().split()[0]
    return {
        "monitors": monitors, "messages": count, "flood": flood, "other": other, "uuid": uuid, "load": float(load),
        "seconds": round(seconds, 3), "produce_seconds": round(produce_s, 3),
        "requests_per_s": round(count / seconds), "requests_per_cpu_s": round(count / cpu) if cpu else 0,
        "handled_per_monitor": [s["handled"] for s in shares],
        "flood_queued": queued(settings, "flood", "f1"), "other_queued": queued(settings, "steady", "s1"),
        **{f"answers_{k}": v for k, v in found.items()},
    }  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--monitors", type=int, nargs="+", default=[1, 2], help="monitor processes per run, in turn")
    parser.add_argument("--rounds", type=int, default=1, help="rounds of the runs, interleaved")
    parser.add_argument("--uuid", action="store_true", help="each flood request has a uuid (answered one by one)")
    args = parser.parse_args()
    runs: dict[int, list[dict[str, Any]]] = {m: [] for m in args.monitors}
    with tempfile.TemporaryDirectory(prefix="shoal-bench-quota-") as tmp:
        run_dir = Path(tmp)
        with start_local_services(run_dir / "services", services=["redis", "kafka"]) as services:
            for round_ in range(args.rounds):
                for monitors in args.monitors:
                    figures = run(services, run_dir, args.messages, args.uuid, monitors)
                    runs[monitors].append(figures)
                    print(f"round {round_ + 1}, {monitors} monitor(s): {figures['requests_per_s']:,} requests/s "
                          f"({figures['messages']:,} in {figures['seconds']} s, {figures['requests_per_cpu_s']:,} per "
                          f"CPU-second), load {figures['load']}; {figures['answers_refused']:,} refused in "
                          f"{figures['answers_refusal_answers']:,} answers; other app {figures['other_queued']:,}/"
                          f"{figures['other']:,} queued", flush=True)  # fmt: skip
    every = [f for found in runs.values() for f in found]
    best = max(args.monitors)
    summary = {f"monitors_{m}": {key: statistics.median(f[key] for f in found)
                                 for key in ("requests_per_s", "requests_per_cpu_s", "load")}
               for m, found in runs.items()}  # fmt: skip
    checks = {
        f"flood refused at >= {TARGET:,} requests/s ({best} monitors, median)":
            summary[f"monitors_{best}"]["requests_per_s"] >= TARGET,
        "no flood request queued": all(f["flood_queued"] == 0 for f in every),
        "every flood request answered as refused": all(f["answers_refused"] == f["flood"] for f in every),
        "every other app's request queued": all(f["other_queued"] == f["other"] for f in every),
    }  # fmt: skip
    figures = {**summary, "runs": every}
    write_result("quota_flood", figures, checks)
    print_checks(checks)
    print(json.dumps(summary, indent=2, sort_keys=True))


if __name__ == "__main__":
    main()
