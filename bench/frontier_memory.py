"""Redis bytes per queued URL, where they go, for seeds and for children of a realistic crawl.

One crawl with realistic crawl-level fields (attrs, 20 allow regexes, a cookie, allowed domains,
an expiry) queues N URLs over D domains twice, into a fresh Redis each time: as seeds, stored the
way the kafka monitor stores them (`CrawlHandler`), and as children of a page of that crawl, built
the way a crawler builds them (`crawler.conversion.new_request`). Each run goes through the
frontier's own enqueue script and reports the growth of Redis `used_memory` per URL and per
domain, and `MEMORY USAGE` of every key summed by structure (queues, stored requests, crawl
profiles and index, dupefilter, per-domain frontier state), with the default self-sizing dupefilter
(exact for the first 100,000 URLs, then Bloom stages at <= 1e-6 false drops) and, for children, the
exact one for comparison; then the self-sizing dupefilter's bytes per URL at 100,000,000 URLs, from
its stage shapes. Targets (issue 41): <= 150 B per queued URL at 1,000,000 URLs over 10,000 domains;
<= 16 B per seen URL at 100,000,000.
Run: `python -m bench.frontier_memory [--urls N] [--domains D]`.
"""

from __future__ import annotations

import argparse
import re
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import redis
from scrapy import Request, Spider

from bench.common import print_checks, write_result
from crawler.conversion import new_request
from crawler.meta import passthrough
from kafka_monitor.plugins.crawl import CrawlHandler
from kafka_monitor.urls import domain_and_fingerprint
from utils import schemas
from utils.frontier import Frontier, NewRequest, crawl_request
from utils.frontier.fingerprint import bloom_size, false_drop_now, stages_for
from utils.services import start_local_services

BATCH = 1000  # requests per enqueue call (a kafka monitor's batch is of this order)
TARGET = 150  # bytes per queued URL
EXACT_MAX, FALSE_DROP = 100_000, 1e-6  # DUPEFILTER_EXACT_MAX, DUPEFILTER_FALSE_DROP
EXACT_BYTES = 55  # Redis bytes per fingerprint of the exact part (measured: 49-60)
CHECKED, CHECK_EVERY = 1000, 10_000  # URLs built through the components: the first ones, then one in this many
EXPIRES = int(time.time()) + 86400
CRAWL = {
    "appid": "benchapp",
    "crawlid": "mem-0d6f3c2a",
    "spiderid": "link",
    "maxdepth": 3,
    "priority": 40,
    "allowed_domains": [f"site{i}-news.com" for i in range(5)],
    "allow_regex": [rf"^https?://www\.site\d+-news\.com/articles/20\d\d/\d\d/section-{i}/.*" for i in range(20)],
    "deny_regex": [r".*\?replytocom=.*", r".*/print/.*", r".*\.(?:jpg|png|gif|pdf)$"],
    "cookie": "session=9f8e7d6c5b4a39281706f5e4d3c2b1a0; consent=yes; region=eu-west; ab=variant-b; tz=Europe%2FParis",
    "useragent": "Mozilla/5.0 (compatible; ShoalBench/1.0; +http://127.0.0.1/bench)",
    "attrs": {"customer": "acme-media", "project": "news-monitoring", "country": "fr", "language": "fr",
              "tags": ["politics", "economy", "sport"], "job": 48213, "notify": "ops@127.0.0.1"},
}  # fmt: skip


def url_of(i: int, domains: int) -> str:
    return f"http://www.site{i % domains}-news.com/articles/2026/11/section-{i % 97}/story-{i}.html"


def seeds(urls: int, domains: int) -> Iterator[NewRequest]:
    """Seeds as the kafka monitor stores a validated crawl request (defaults filled, `ts` set)."""
    return _alike(urls, domains, _seed)


def children(urls: int, domains: int) -> Iterator[NewRequest]:
    """Links found on a page of the crawl, as the crawler queues them (meta passed through, depth + 1)."""
    return _alike(urls, domains, _child)


def _seed(url: str) -> NewRequest:
    message = schemas.validate("crawl", {**CRAWL, "url": url, "expires": EXPIRES})
    message["ts"] = time.time()
    domain, fp = domain_and_fingerprint(message["url"], "GET", None, True)
    record = crawl_request.to_record(message)
    # without the kafka monitor's offset mark (a constant ~1.5 MB window per partition, not per URL)
    return replace(CrawlHandler._new_request(message, record, domain, fp, _NO_ORIGIN), offset_key="")


def _child(url: str) -> NewRequest:
    parent = crawl_request.from_record({**CRAWL, "url": url, "expires": EXPIRES})
    meta = {**passthrough(parent), "curdepth": 1}
    queued = new_request(Request(url, meta=meta), Spider("link"))
    assert queued is not None
    return queued


def _alike(urls: int, domains: int, make: Callable[[str], NewRequest]) -> Iterator[NewRequest]:
    """`make` for the first CHECKED URLs; then the same request with the URL, domain and fingerprint
    swapped (building each through the components costs ~0.5 ms on a loaded 2-core machine), checked
    equal to `make`'s on a sample."""
    template = make(url_of(0, domains))
    for i in range(urls):
        url = url_of(i, domains)
        if i < CHECKED or i % CHECK_EVERY == 0:
            made = make(url)
        else:
            domain, fp = domain_and_fingerprint(url, "GET", None, True)
            payload = template.payload.replace(_short(url_of(0, domains)), _short(url))
            made = replace(template, domain=domain, fingerprint=fp, payload=payload)
            if i % CHECK_EVERY == 1:
                assert made == make(url), "the fast path stores what the components store"
        yield made


def _short(url: str) -> str:
    return url.removeprefix("http:")  # as crawl_request stores an http:// URL


class _Origin:
    topic, partition, offset, fingerprint = "", 0, -1, ""


_NO_ORIGIN: Any = _Origin()
# Key name -> structure, first match wins.
STRUCTURES = [
    ("queues", re.compile(r":queue$")),
    ("stored requests", re.compile(r":crawl:.*:requests:")),
    ("crawl profiles + domain index", re.compile(r":crawl:.*:(profiles|domains)$")),
    ("dupefilter", re.compile(r":dupefilter:")),
    ("progress, codes", re.compile(r":(crawl:.*:progress|crawl_codes|crawl_names)$")),
    ("per-domain frontier state", re.compile(r":(line|line_of|heads|classes_ready|classes_snoozed|wake|policy)$")),
]


def by_structure(client: redis.Redis) -> dict[str, int]:
    """MEMORY USAGE of every key, summed by structure (SAMPLES 0: every element counted)."""
    sums: dict[str, int] = defaultdict(int)
    pipe = client.pipeline(transaction=False)
    names = [k.decode() for k in client.scan_iter(count=5000)]
    for name in names:
        pipe.execute_command("MEMORY", "USAGE", name, "SAMPLES", "0")
    for name, size in zip(names, pipe.execute(), strict=True):
        kind = next((label for label, pattern in STRUCTURES if pattern.search(name)), "other")
        sums[kind] += int(size or 0)
    return dict(sums)


def measure(client: redis.Redis, make: Callable[[int, int], Iterator[NewRequest]], urls: int, domains: int,
            mode: str) -> dict[str, Any]:  # fmt: skip
    client.flushall()
    frontier = Frontier(client, dupefilter_mode=mode, bloom=bloom_size(max(urls, 1000), 1e-6),
                        exact_max=EXACT_MAX, false_drop=FALSE_DROP)  # the defaults
    before = int(client.info("memory")["used_memory"])
    batch: list[NewRequest] = []
    statuses: Counter[str] = Counter()
    started = time.perf_counter()
    for request in make(urls, domains):
        batch.append(request)
        if len(batch) == BATCH:
            statuses.update(frontier.enqueue(batch))
            batch = []
    if batch:
        statuses.update(frontier.enqueue(batch))
    assert set(statuses) <= {"queued", "duplicate"}, statuses  # every URL is new: a duplicate is a false drop
    elapsed = time.perf_counter() - started
    grown = int(client.info("memory")["used_memory"]) - before
    structures = by_structure(client)
    return {
        "bytes_per_url": round(grown / urls, 1),
        "bytes_per_domain": round(grown / domains),
        "by_structure_bytes_per_url": {k: round(v / urls, 1) for k, v in sorted(structures.items())},
        "enqueue_urls_per_s": round(urls / elapsed),
        "false_drops": statuses["duplicate"],
    }


RUNS = (("seeds", seeds, "auto"), ("children", children, "auto"), ("children", children, "exact"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--urls", type=int, default=1_000_000)
    parser.add_argument("--domains", type=int, default=10_000)
    parser.add_argument("--runs", default=",".join(f"{kind}:{mode}" for kind, _, mode in RUNS),
                        help="which of kind:mode to run (seeds|children : auto|exact)")
    args = parser.parse_args()
    runs = [run for run in RUNS if f"{run[0]}:{run[2]}" in args.runs.split(",")]
    figures: dict[str, Any] = {"urls": args.urls, "domains": args.domains,
                               "old_payload_bytes": len(ujson_full_record(args.domains))}  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="shoal-bench-") as tmp:
        services = start_local_services(Path(tmp), services=("redis",))
        try:
            client = redis.Redis(host=services.redis.host, port=services.redis.port)
            for kind, make, mode in runs:
                figures[f"{kind}_{mode}"] = measure(client, make, args.urls, args.domains, mode)
                print(f"{kind:8} {mode:5}: {figures[f'{kind}_{mode}']}", flush=True)
        finally:
            services.stop_all()
    stages = stages_for(EXACT_MAX, FALSE_DROP, 100_000_000)
    figures["dupefilter_at_100M"] = {
        "bytes_per_url": round((EXACT_MAX * EXACT_BYTES + sum(bits for bits, _, _ in stages) / 8) / 100_000_000, 2),
        "stages": len(stages), "false_drop_rate": false_drop_now(stages)}  # fmt: skip
    checks = {f"{kind} <= {TARGET} B/URL (self-sizing dupefilter)": figures[f"{kind}_auto"]["bytes_per_url"] <= TARGET
              for kind in ("seeds", "children") if f"{kind}_auto" in figures}  # fmt: skip
    at_100m = figures["dupefilter_at_100M"]
    checks["dupefilter <= 16 B/URL at 100 M, false drops <= 1e-6"] = (
        at_100m["bytes_per_url"] <= 16 and at_100m["false_drop_rate"] <= 1e-6)
    path = write_result("frontier_memory", figures, checks)
    print(f"-> {path}")
    print_checks(checks)


def ujson_full_record(domains: int) -> str:
    """What one request of this crawl stored before crawl-level fields were kept once: its whole JSON."""
    record = crawl_request.to_record({**CRAWL, "url": url_of(123_456, domains), "expires": int(time.time())})
    stored = crawl_request.encode(record)
    return stored.profile + stored.payload


if __name__ == "__main__":
    main()
