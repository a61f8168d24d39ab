"""(c) Idle-cluster latency: a crawl request on Kafka -> its page on the firehose.

One kafka monitor and one crawler on an idle cluster; each of N requests (a new crawl of one
page, maxdepth 0) is sent alone and timed until its page arrives. Target: p50 <= 0.3 s,
p99 <= 1 s (Scrapy Cluster: a 5 s poll, 2.5 s mean). Run: `python -m bench.latency`.
"""

from __future__ import annotations

import argparse
import json
import time
import uuid

from confluent_kafka import Consumer, Producer

from bench.common import bench_cluster, percentile, print_checks, write_result
from utils.config.clients import ensure_topics
from utils.demosite import SiteServer, generate_site
from utils.services import free_port


def measure(samples: int) -> dict[str, float]:
    site = generate_site(hosts=1, pages_per_host=samples + 5, seed=3, base_ip_octet=200, port=free_port())
    with SiteServer(site), bench_cluster(QUEUE_HITS=0, QUEUE_MODERATED=False, LOG_LEVEL="WARNING",
                                         SCHEDULER_IDLE_POLL=0.05, SCHEDULER_FLUSH_INTERVAL=0.05) as cluster:
        bootstrap = cluster.settings.get_list("KAFKA_HOSTS")[0]
        cluster.start("kafka-monitor")
        cluster.start("crawl", "--spider", "link")
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"lat-{uuid.uuid4().hex[:6]}",
                             "auto.offset.reset": "latest", "enable.auto.commit": False})
        topic = cluster.settings.topic("crawled_firehose")
        ensure_topics(cluster.settings, [topic])
        consumer.subscribe([topic])
        while not consumer.assignment():  # the group join (~3 s) must finish before timing starts
            consumer.poll(0.1)
        producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
        pages = [u for u in site.pages if u.endswith(".html") and "/page/" in u][: samples + 3]
        latencies = []
        for i, url in enumerate(pages):
            started = time.monotonic()
            crawlid = f"lat{i}"
            producer.produce(cluster.settings.incoming_topic,
                             json.dumps({"url": url, "appid": "bench", "crawlid": crawlid}))
            producer.flush(10)
            if not _wait_for_page(consumer, crawlid, timeout=30):
                raise SystemExit(f"no page for {url} within 30 s")
            if i >= 3:  # the first requests warm up connections, topics and the group
                latencies.append(time.monotonic() - started)
            time.sleep(0.2)  # idle cluster between requests
        consumer.close()
    return {"samples": len(latencies), "p50_s": percentile(latencies, 50), "p99_s": percentile(latencies, 99),
            "mean_s": sum(latencies) / len(latencies), "max_s": max(latencies)}


def _wait_for_page(consumer: Consumer, crawlid: str, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        message = consumer.poll(0.01)
        if message is None or message.error():
            continue
        if json.loads(message.value()).get("crawlid") == crawlid:
            return True
    return False


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--samples", type=int, default=60)
    figures = measure(parser.parse_args().samples)
    checks = {"p50 <= 0.3 s": figures["p50_s"] <= 0.3, "p99 <= 1 s": figures["p99_s"] <= 1.0}
    path = write_result("latency", figures, checks)
    print(f"idle latency over {figures['samples']} requests: p50 {figures['p50_s'] * 1000:.0f} ms, "
          f"p99 {figures['p99_s'] * 1000:.0f} ms, max {figures['max_s'] * 1000:.0f} ms -> {path}")
    print_checks(checks)


if __name__ == "__main__":
    main()
