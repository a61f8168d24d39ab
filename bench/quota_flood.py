"""Quota flood: one app's flood over its queued quota, answered and refused, while another app queues.

Target (issue 42): a flood of 1,000,000 requests from one app over its `max_queued` quota is answered
and refused at >= 20,000 requests/s by one kafka monitor process, while another app's requests,
mixed in, are queued normally. The benchmark starts its own Redis and broker on free ports, puts
the quotas where the redis monitors copy them (`shoal:apps:quotas`) with the flooding app already
at its quota, fills the incoming topic with N requests (one in OTHER_EVERY from the other app, the
rest from the flood), then times one in-process monitor from its first batch to its last commit
at LOG_LEVEL=INFO (the default). It checks that no flood request was queued, that every one of them
was answered as refused (the answers' counts add up, read back from the outbound topic), and that
every request of the other app was queued. `--uuid` gives each flood request a uuid: then each is
answered on its own (N answers), not once per crawl and batch.

    .venv/bin/python -m bench.quota_flood [--messages N] [--uuid]

Prints the figures and writes bench/results/quota_flood.json.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import tempfile
import time
from contextlib import redirect_stdout
from pathlib import Path
from typing import Any

import ujson

from bench.common import print_checks, write_result
from bench.kafka_monitor_ingest import settings_for
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


def timed_ingest(settings: Settings, count: int) -> tuple[float, float]:
    """Seconds and CPU-seconds one monitor takes from its first batch to its last commit."""
    from kafka_monitor.monitor import KafkaMonitor  # after setup_logging: the monitor reads the level

    monitor = KafkaMonitor.from_settings(settings)
    handled, began, cpu_began = 0, 0.0, 0.0
    deadline = time.monotonic() + 900
    while handled < count and time.monotonic() < deadline:
        n = monitor.run_once()
        if n and not began:
            began, cpu_began = time.perf_counter(), time.process_time()
        handled += n
    elapsed, cpu = time.perf_counter() - began, time.process_time() - cpu_began
    monitor.close()
    if handled < count:
        raise RuntimeError(f"only {handled} of {count} messages handled in time")
    return elapsed, cpu


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


def run(count: int, uuid: bool) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="shoal-bench-quota-") as tmp:
        run_dir = Path(tmp)
        with start_local_services(run_dir / "services", services=["redis", "kafka"]) as services:
            settings = settings_for(services, "INFO", {})
            log_file = open(run_dir / "kafka-monitor.log", "w")  # noqa: SIM115 - open until the run ends
            with redirect_stdout(log_file):
                setup_logging(settings, component="kafka-monitor")  # stdout as under supervisord
            client = redis_client(settings)
            client.config_set("appendonly", "no")  # as bench/kafka_monitor_ingest.py: measure the monitor
            mirror.write(client, Quotas.parse(f"apps: {{flood: {{max_queued: {QUOTA}}}}}"))
            client.hset(keys.APPS_QUEUED, "flood", QUOTA)
            ensure_topics(settings, [settings.incoming_topic])
            try:
                produce_s = fill(settings, count, uuid)
                seconds, cpu = timed_ingest(settings, count)
            finally:
                logging.getLogger().handlers[:] = [logging.StreamHandler(sys.stderr)]
                log_file.close()
            other = len(range(0, count, OTHER_EVERY))
            flood = count - other
            found = answers(settings, flood)
            return {
                "messages": count, "flood": flood, "other": other, "uuid": uuid,
                "seconds": round(seconds, 3), "produce_seconds": round(produce_s, 3),
                "requests_per_s": round(count / seconds), "requests_per_cpu_s": round(count / cpu) if cpu else 0,
                "flood_queued": queued(settings, "flood", "f1"), "other_queued": queued(settings, "steady", "s1"),
                **{f"answers_{k}": v for k, v in found.items()},
            }  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--uuid", action="store_true", help="each flood request has a uuid (answered one by one)")
    args = parser.parse_args()
    figures = run(args.messages, args.uuid)
    checks = {
        f"flood refused at >= {TARGET:,} requests/s": figures["requests_per_s"] >= TARGET,
        "no flood request queued": figures["flood_queued"] == 0,
        "every flood request answered as refused": figures["answers_refused"] == figures["flood"],
        "every other app's request queued": figures["other_queued"] == figures["other"],
    }
    write_result("quota_flood", figures, checks)
    print(f"quota flood: {figures['requests_per_s']:,} requests/s ({figures['messages']:,} in {figures['seconds']} s, "
          f"{figures['requests_per_cpu_s']:,} per CPU-second); {figures['answers_refused']:,} refused in "
          f"{figures['answers_refusal_answers']:,} answers; other app {figures['other_queued']:,}/{figures['other']:,} "
          f"queued")  # fmt: skip
    print_checks(checks)
    print(json.dumps(figures, indent=2, sort_keys=True))


if __name__ == "__main__":
    main()
