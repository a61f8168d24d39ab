"""(h) Throttle accuracy: three spider processes sharing one domain at 20 hits per 10 s for 60 s.

Requests are fed through Kafka (kafka monitor) and counted where they land: the demo site's own
hit counter. Expected 120 requests in 60 s; target within +/-5 %. Run: `python -m bench.throttle_accuracy`.
"""

from __future__ import annotations

import json
import time

from confluent_kafka import Producer

from bench.common import bench_cluster, write_result
from tests.support.services import wait_until
from utils.demosite import SiteServer, generate_site
from utils.services import free_port

HITS, WINDOW, SECONDS, SPIDERS = 20, 10, 60, 3


def page_hits(server: SiteServer) -> int:
    return sum(n for (_host, path), n in list(server.hits.items()) if path.startswith("/page/"))


def measure() -> dict[str, float]:
    site = generate_site(hosts=1, pages_per_host=300, seed=5, base_ip_octet=201, port=free_port())
    with SiteServer(site) as server, bench_cluster(QUEUE_HITS=HITS, QUEUE_WINDOW=WINDOW, QUEUE_MODERATED="true",
                                                   LOG_LEVEL="WARNING") as cluster:
        cluster.start("kafka-monitor")
        for _ in range(SPIDERS):
            cluster.start("crawl", "--spider", "link")
        producer = Producer({"bootstrap.servers": cluster.settings.get_list("KAFKA_HOSTS")[0]})
        for i in range(250):
            producer.produce(cluster.settings.incoming_topic, json.dumps(
                {"url": f"http://{site.hosts[0]}/page/{i}.html", "appid": "bench", "crawlid": "rate"}))
        producer.flush(30)
        wait_until(lambda: page_hits(server) >= 1, timeout=60, interval=0.005)
        started = time.monotonic()
        time.sleep(SECONDS)
        got = page_hits(server)
        elapsed = time.monotonic() - started
    expected = HITS * SECONDS / WINDOW
    return {"requests": got, "expected": expected, "error_pct": round(100 * (got - expected) / expected, 2),
            "seconds": round(elapsed, 2), "spiders": SPIDERS}


def main() -> None:
    figures = measure()
    checks = {"within +/-5 % of hits/window": abs(figures["error_pct"]) <= 5}
    path = write_result("throttle_accuracy", figures, checks)
    print(f"throttle: {figures['requests']} requests in {SECONDS} s by {SPIDERS} spiders, expected "
          f"{figures['expected']:.0f} ({figures['error_pct']:+.1f} %) -> {path}")


if __name__ == "__main__":
    main()
