"""Sink throughput: page messages per second one sink process moves from Kafka into PostgreSQL.

Target (issue 19): >= 5,000 page messages/s per sink process for the demo site's pages. The
benchmark starts its own broker (with Redis and ZooKeeper, unused) and its own PostgreSQL (Debian's,
initdb into a temporary directory) on free ports, fills the firehose with page messages made from
the generated demo site (3 hosts x 200 pages, bodies of ~2.5 kB, the crawler's message shape; each
round under a new appid, so every message is a new row), then times one in-process sink from its
first poll until every message is stored and committed. A second pass sends the same pages again,
newer and unchanged (the re-crawl case: only fetched_at moves). For comparison, in the same run,
a plain loop reads the same topic and does one INSERT ... ON CONFLICT per message (autocommit).

    .venv/bin/python -m bench.sink_throughput [--rounds R] [--plain N]

Prints the figures and writes bench/results/sink_throughput.json.
"""

from __future__ import annotations

import argparse
import base64
import os
import shutil
import threading
import time
from pathlib import Path
from typing import Any

import ujson
from confluent_kafka import Producer

from bench.common import bench_cluster, write_result
from sink.loop import Sink
from sink.messages import Parser
from sink.schema import Tables, migrate
from sink.store import upsert_pages
from tests.support.postgres import start_postgres
from tests.support.sink import sink_settings
from utils.config.clients import ensure_topics, kafka_consumer
from utils.config.postgres import postgres_connect
from utils.config.settings import Settings
from utils.demosite import generate_site

TARGET = 5_000  # page messages/s per sink process (issue 19)


def demo_messages(round_: int, stamp: str) -> list[bytes]:
    """The demo site's pages as the crawler sends them, under appid `bench<round>`."""
    site = generate_site(hosts=3, pages_per_host=200, seed=7, port=8181)
    messages = []
    for i, (url, page) in enumerate(sorted(site.pages.items())):
        text = page.content_type.startswith("text/")
        message: dict[str, Any] = {
            "url": url, "response_url": url, "status_code": page.status, "status_msg": "OK",
            "response_headers": {"Content-Type": [page.content_type], "Content-Length": [str(len(page.body))]},
            "request_headers": {"User-Agent": ["Shoal/0.1"]},
            "body": page.body.decode("utf-8") if text else base64.b64encode(page.body).decode(),
            "encoding": "utf-8" if text else None,
            "links": [{"url": link, "text": t} for link, t in zip(page.links, page.link_texts, strict=False)],
            "appid": f"bench{round_}", "crawlid": f"crawl{round_}", "spiderid": "link", "attrs": None,
            "request_id": f"{round_:04x}{i:012x}", "attempt": 0, "curdepth": 1, "success": True,
            "timestamp": stamp, "worker": "bench:1",
        }  # fmt: skip
        if not text:
            message["body_encoding"] = "base64"
        messages.append(ujson.dumps(message, sort_keys=True).encode())
    return messages


def fill(settings: Settings, messages: list[bytes]) -> None:
    producer = Producer({"bootstrap.servers": settings.get_list("KAFKA_HOSTS")[0], "linger.ms": 20,
                         "queue.buffering.max.messages": 1_000_000, "message.max.bytes": 10_000_000})  # fmt: skip
    for value in messages:
        producer.produce(settings.topic("crawled_firehose"), value)
        producer.poll(0)
    assert producer.flush(60) == 0


def time_sink(settings: Settings, total: int) -> dict[str, float]:
    """One in-process sink from its first poll until `total` messages are committed."""
    sink = Sink.from_settings(settings)
    sink.store.connect()
    stop = threading.Event()
    first = 0
    while first == 0:  # group join and the first batch, outside the timing
        first = sink.run_once(stop)
    handled = first
    backend = sink.store.connect().info.backend_pid
    began, cpu, server = time.perf_counter(), time.process_time(), process_cpu(backend)
    while handled < total:
        handled += sink.run_once(stop)
    seconds, cpu_seconds = time.perf_counter() - began, time.process_time() - cpu
    server_seconds = process_cpu(backend) - server
    sink.close()
    return {"seconds": seconds, "cpu": cpu_seconds, "server_cpu": server_seconds, "messages": total - first}


def process_cpu(pid: int) -> float:
    """CPU seconds (user + system) of a process so far: here the sink's PostgreSQL backend."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def time_plain(settings: Settings, limit: int) -> float:
    """Messages/s of one INSERT ... ON CONFLICT per message (autocommit), read from the same topic."""
    tables = Tables(schema=settings.get_str("SINK_DB_SCHEMA") + "_plain")
    parser = Parser(settings.topic("items"))
    consumer = kafka_consumer(settings, [settings.topic("crawled_firehose")], None, max_poll_records=500)
    with postgres_connect(settings, autocommit=True) as connection:
        migrate(connection, tables)
        # The sink's own upsert, fed one row at a time from a VALUES list instead of the staging table.
        upsert = upsert_pages(tables).as_string(connection).replace("FROM sink_stage_pages ORDER BY appid, url, "
                                                                    "fetched_at DESC", "FROM stage")
        single = ("WITH stage(appid, url, crawlid, spiderid, status_code, content_hash, headers, links, body, "
                  "fetched_at) AS (VALUES (%s, %s, %s, %s, %s::integer, %s::bytea, %s::jsonb, %s::jsonb, %s, "
                  "%s::timestamptz)) ") + upsert  # fmt: skip
        done = 0
        began = 0.0
        while done < limit:
            for record in (r for part in consumer.poll(timeout_ms=500).values() for r in part):
                if done == 0:
                    began = time.perf_counter()
                rows = parser.parse([record])
                for row in rows.pages:
                    connection.execute(single, row)  # type: ignore[arg-type]
                done += 1
                if done >= limit:
                    break
        seconds = time.perf_counter() - began
    consumer.close()
    return done / seconds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=50, help="copies of the demo site's pages (new rows each)")
    parser.add_argument("--plain", type=int, default=3000, help="messages the one-INSERT-per-message loop writes")
    args = parser.parse_args(argv)
    postgres, pg_root = start_postgres()
    try:
        with bench_cluster(LOG_LEVEL="WARNING", KAFKA_TOPIC_PARTITIONS=3) as cluster:
            sink_settings(cluster, postgres, "bench")
            settings = cluster.settings
            ensure_topics(settings, [settings.topic("crawled_firehose")])
            batch = [m for r in range(args.rounds) for m in demo_messages(r, "2026-11-25T06:00:00.000001")]
            fill(settings, batch)
            insert = time_sink(settings, len(batch))
            again = [m for r in range(args.rounds) for m in demo_messages(r, "2026-11-25T07:00:00.000001")]
            fill(settings, again)
            recrawl = time_sink(settings, len(again))
            with postgres_connect(settings, autocommit=True) as connection:
                stored = connection.execute("SELECT count(*) FROM bench.pages").fetchone()
            plain = time_plain(settings, args.plain)
    finally:
        postgres.service.stop()
        shutil.rmtree(pg_root, ignore_errors=True)
    rate = insert["messages"] / insert["seconds"]
    recrawl_rate = recrawl["messages"] / recrawl["seconds"]
    figures = {
        "messages": len(batch),
        "rows_stored": stored[0] if stored else 0,
        "sink_msgs_per_s": round(rate),
        "sink_us_per_row": round(1e6 / rate, 1),
        "sink_cpu_us_per_row": round(1e6 * insert["cpu"] / insert["messages"], 1),
        "postgres_backend_cpu_us_per_row": round(1e6 * insert["server_cpu"] / insert["messages"], 1),
        "load_average_1m": round(os.getloadavg()[0], 1),
        "recrawl_msgs_per_s": round(recrawl_rate),
        "plain_insert_msgs_per_s": round(plain),
        "plain_us_per_row": round(1e6 / plain, 1),
        "speedup_vs_plain": round(rate / plain, 1),
    }
    for name, value in figures.items():
        print(f"{name:>26}: {value}")
    checks = {f"sink >= {TARGET} msg/s": rate >= TARGET, "every message stored": figures["rows_stored"] == len(batch)}
    path = write_result("sink_throughput", figures, checks)
    print(f"written: {path}")
    return 0 if all(checks.values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
