"""(f) Redis bytes per queued request and per dupefilter URL, at 1M URLs.

Measured as the growth of Redis `used_memory` while one crawl queues N child requests of a
realistic shape (the frontier's own enqueue script, so queue member, payload in the crawl's
requests hash (which is also its index) and dupefilter fingerprint are all counted), then per
dupefilter URL alone in exact and in Bloom mode. Targets: <= 450 B per queued request, <= 70 B per URL exact,
<= 2 B per URL Bloom at 0.1 % false positives. Run: `python -m bench.memory [--urls N]`.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import redis

from bench.common import print_checks, write_result
from utils.frontier import Frontier, NewRequest, crawl_request, keys
from utils.frontier.fingerprint import bloom_size, fingerprint
from utils.services import start_local_services

BATCH = 5000
DOMAINS = 50


def child(i: int) -> NewRequest:
    """A child request as a link spider queues it: depth, priority and a typical URL length."""
    domain = f"site{i % DOMAINS}.example.com"
    url = f"http://www.{domain}/articles/2026/11/section-{i % 97}/story-{i}.html"
    record = crawl_request.to_record({"url": url, "appid": "benchapp", "crawlid": "mem1", "spiderid": "link",
                                      "priority": -9, "maxdepth": 3, "curdepth": 1})
    return NewRequest("link", domain, -9, "benchapp", "mem1", fingerprint=fingerprint(url),
                      **crawl_request.encode(record)._asdict())


def used(client: redis.Redis) -> int:
    return int(client.info("memory")["used_memory"])


def queued_bytes(client: redis.Redis, urls: int) -> float:
    frontier = Frontier(client)
    before = used(client)
    for start in range(0, urls, BATCH):
        frontier.enqueue([child(i) for i in range(start, min(urls, start + BATCH))])
    return (used(client) - before) / urls


def exact_dupefilter_bytes(client: redis.Redis, urls: int) -> float:
    key = keys.dupefilter("link", "memexact")
    before = used(client)
    for start in range(0, urls, BATCH):
        client.sadd(key, *(fingerprint(f"http://example.com/p/{i}") for i in range(start, min(urls, start + BATCH))))
    return (used(client) - before) / urls


def bloom_dupefilter(client: redis.Redis, urls: int, error_rate: float = 0.001) -> dict[str, float]:
    """Bytes per URL and the false positives seen, of a Bloom-mode crawl sized for `urls` URLs.

    Every request goes through the real enqueue script in Bloom mode; domain_max_pages = 1 keeps
    all but the first out of the queue *after* the dupefilter has recorded them, so the figure is
    the filter's alone. Each URL is new, so every `duplicate` answer is a false positive.
    """
    frontier = Frontier(client, dupefilter_mode="bloom", bloom=bloom_size(urls, error_rate))
    false_positives = 0
    for start in range(0, urls, BATCH):
        batch = [NewRequest("link", "example.com", 1, "benchapp", "membloom", '{"url":"u"}',
                            fingerprint(f"http://example.com/p/{i}"), max_pages=1)
                 for i in range(start, min(urls, start + BATCH))]  # fmt: skip
        false_positives += frontier.enqueue(batch).count("duplicate")
    size = int(client.memory_usage(keys.bloom_dupefilter("link", "membloom")) or 0)
    return {"bytes_per_url_bloom": round(size / urls, 2), "bloom_false_positive_rate": false_positives / urls}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--urls", type=int, default=1_000_000)
    urls = parser.parse_args().urls
    with tempfile.TemporaryDirectory(prefix="shoal-bench-") as tmp:
        services = start_local_services(Path(tmp), services=("redis",))
        try:
            client = redis.Redis(host=services.redis.host, port=services.redis.port)
            figures = {"urls": urls, "bytes_per_queued_request": round(queued_bytes(client, urls), 1)}
            client.flushall()
            figures["bytes_per_url_exact"] = round(exact_dupefilter_bytes(client, urls), 1)
            client.flushall()
            figures.update(bloom_dupefilter(client, urls))
        finally:
            services.stop_all()
    checks = {"queued request <= 450 B": figures["bytes_per_queued_request"] <= 450,
              "exact dupefilter <= 70 B/URL": figures["bytes_per_url_exact"] <= 70,
              "Bloom dupefilter <= 2 B/URL": figures["bytes_per_url_bloom"] <= 2,
              "Bloom false positives <= 0.1 %": figures["bloom_false_positive_rate"] <= 0.001}
    path = write_result("memory", figures, checks)
    print(f"Redis memory at {urls:,} URLs: {figures['bytes_per_queued_request']} B per queued request, "
          f"{figures['bytes_per_url_exact']} B per dupefilter URL (exact), {figures['bytes_per_url_bloom']} B "
          f"(Bloom, {figures['bloom_false_positive_rate']:.4%} false positives) -> {path}")
    print_checks(checks)


if __name__ == "__main__":
    main()
