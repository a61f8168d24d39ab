"""Near-duplicate detection on a generated set whose truth is known, and the index's cost at 1,000,000 pages.

Quality: `--articles` articles (utils/demosite/duplicates.py), each served as `--copies` copies under
different boilerplate, ads, date lines and tracking parameters (some copies with one word edited or a
correction note), plus as many other articles each under exactly the boilerplate of one copy (the
same template, another text). In a shuffled order every page goes through Shoal's extraction
(utils/extract/content.py) and the Redis index (utils/frontier/near_duplicates.py), as a crawl with
`near_duplicates` does. Truth: a page is a near-duplicate when an earlier page holds the same
article. Precision: flagged pages whose `duplicate_of` holds their article; recall: true
near-duplicates flagged. Also printed: recall by what the copy changed, and the distances seen.

Cost: `--index-pages` random SimHashes indexed (one script call each, pipelined), then `--lookups`
lookups of near and of new fingerprints timed one at a time (read, compare, add or count); Redis
memory per indexed page from INFO used_memory, the band hashes alone and with the first-URL map
(URLs of 60 bytes).
Targets: precision >= 0.95, recall >= 0.90, lookup <= 1 ms, <= 64 B of Redis per indexed page.
"""

from __future__ import annotations

import argparse
import random
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from bench.common import percentile, print_checks, write_result
from utils.demosite.duplicates import article, render, tracking, variants
from utils.extract.content import extract
from utils.extract.simhash import distance
from utils.frontier import keys
from utils.frontier.near_duplicates import BAND_WIDTHS, NearDuplicateIndex, band_values
from utils.services import start_local_services

APP = "bench"


def pages(articles: int, copies: int, seed: int) -> list[tuple[str, int, str]]:
    """(URL, article key, HTML): the copies of each article, and one other article per article on a copy's template."""
    out = []
    for key in range(articles):
        item = article(key)
        for n, (path, html) in enumerate(variants(item, copies, first_boilerplate=key * copies)):
            out.append((f"http://127.0.46.{1 + key % 200}{path}&copy={n}", key, html))
        twin = article(10**6 + key)
        rng = random.Random(key)
        out.append((f"http://127.0.46.{1 + key % 200}/article/{twin.key}.html{tracking(rng)}", twin.key,
                    render(twin, key * copies + rng.randrange(copies))))  # fmt: skip
    random.Random(seed).shuffle(out)
    return out


def quality(client: Any, articles: int, copies: int, distance_bits: int) -> dict[str, Any]:
    index = NearDuplicateIndex(client, ttl=3600, distance=distance_bits)
    seen: dict[int, str] = {}  # article -> first URL
    article_of: dict[str, int] = {}
    fingerprint_of: dict[str, int] = {}
    flagged = right = truly = found = 0
    seconds = 0.0
    for url, key, html in pages(articles, copies, seed=46):
        started = time.process_time()
        fields = extract(html, url, ("text",), True)
        seconds += time.process_time() - started
        verdict = index.check(APP, "quality", fields["simhash"], url, url.split("/")[2])
        article_of[url], fingerprint_of[url] = key, int(fields["simhash"], 16)
        is_copy = key in seen
        truly += is_copy
        if verdict.near_duplicate:
            flagged += 1
            right += article_of.get(verdict.duplicate_of or "") == key
            found += is_copy
        seen.setdefault(key, url)
    distances = Counter(distance(fingerprint_of[seen[article_of[u]]], fp) for u, fp in fingerprint_of.items()
                        if seen[article_of[u]] != u)  # fmt: skip
    return {"pages": len(article_of), "true_near_duplicates": truly, "flagged": flagged,
            "precision": round(right / flagged, 4) if flagged else 1.0, "recall": round(found / truly, 4),
            "distance_bits": distance_bits, "copy_distances": dict(sorted(distances.items())),
            "extract_cpu_ms_per_page": round(1000 * seconds / len(article_of), 2)}  # fmt: skip


def cost(client: Any, indexed: int, lookups: int) -> dict[str, Any]:
    """Index `indexed` random fingerprints, then time lookups one at a time.

    The index is filled with the hashes `near_duplicates.lua` leaves (the same fields and values,
    written in bulk: a million script calls from Python took 15 minutes here); the lookups are real.
    Besides wall time (which on a loaded machine is mostly waiting for a core), each lookup's cost is
    given as the crawler's CPU plus Redis' own time (INFO commandstats)."""
    rng = random.Random(7)
    client.flushdb()
    before = int(client.info("memory")["used_memory"])
    index = NearDuplicateIndex(client, ttl=86400, distance=6)
    names = [keys.near_duplicate_band(APP, i) for i in range(len(BAND_WIDTHS))]
    buckets: list[dict[bytes, bytes]] = [{} for _ in names]
    urls: dict[bytes, str] = {}
    sample = []
    for n in range(indexed):
        fp = rng.getrandbits(64)
        if n % max(indexed // lookups, 1) == 0:
            sample.append(fp)
        raw = fp.to_bytes(8, "big")
        for bucket, band in zip(buckets, band_values(fp), strict=True):
            bucket[band] = bucket.get(band, b"") + raw
        urls[raw] = f"http://127.0.46.1/section/{n:09d}/article-with-a-typical-slug.html"[:60]
    for name, bucket in zip(names, buckets, strict=True):
        client.hset(name, mapping=bucket)
    bands_only = int(client.info("memory")["used_memory"]) - before
    first = keys.near_duplicate_first(APP)
    items = list(urls.items())
    for i in range(0, len(items), 10_000):
        client.hset(first, mapping=dict(items[i : i + 10_000]))
    with_urls = int(client.info("memory")["used_memory"]) - before
    del buckets, urls, items
    client.config_resetstat()
    timings = []
    cpu = time.process_time()
    for i, fp in enumerate(sample[:lookups]):
        probe = fp ^ (1 << rng.randrange(64)) ^ (1 << rng.randrange(64)) if i % 2 else rng.getrandbits(64)
        started = time.perf_counter()
        index.check(APP, "cost", f"{probe:016x}", f"http://127.0.46.1/probe/{i}", "127.0.46.1")
        timings.append(time.perf_counter() - started)
    cpu = time.process_time() - cpu
    redis_usec = sum(int(stat["usec"]) for stat in client.info("commandstats").values())
    timings.sort()
    return {"indexed_pages": indexed, "lookups": len(timings),
            "lookup_ms_client_cpu": round(1000 * cpu / len(timings), 3),
            "lookup_ms_redis": round(redis_usec / 1000 / len(timings), 3),
            "lookup_ms_wall_p50": round(1000 * percentile(timings, 50), 3),
            "lookup_ms_wall_p99": round(1000 * percentile(timings, 99), 3),
            "load_average": Path("/proc/loadavg").read_text().split()[0],
            "redis_bytes_per_page": round(with_urls / indexed, 1),
            "redis_bytes_per_page_bands_only": round(bands_only / indexed, 1)}  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--articles", type=int, default=300)
    parser.add_argument("--copies", type=int, default=4)
    parser.add_argument("--distance", type=int, default=6, help="NEAR_DUPLICATE_DISTANCE")
    parser.add_argument("--index-pages", type=int, default=1_000_000)
    parser.add_argument("--lookups", type=int, default=2000)
    parser.add_argument("--no-quality", action="store_true", help="the cost figures only")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="shoal-bench-") as tmp:
        services = start_local_services(Path(tmp), services=["redis"])
        try:
            client = _client(services)
            found = {} if args.no_quality else quality(client, args.articles, args.copies, args.distance)
            figures = {"quality": found, "cost": cost(client, args.index_pages, args.lookups)}
        finally:
            services.stop_all()
    q, c = figures["quality"], figures["cost"]
    checks: dict[str, bool] = {}
    if q:
        checks["precision >= 0.95"] = q["precision"] >= 0.95
        checks["recall >= 0.90"] = q["recall"] >= 0.90
    checks["lookup <= 1 ms (crawler CPU + Redis time)"] = c["lookup_ms_client_cpu"] + c["lookup_ms_redis"] <= 1.0
    checks["<= 64 B of Redis per indexed page (bands)"] = c["redis_bytes_per_page_bands_only"] <= 64
    print(figures)
    print_checks(checks)
    write_result("near_duplicates", figures, checks)
    return 0 if all(checks.values()) else 1


def _client(services: Any) -> Any:
    import redis

    return redis.Redis(host=services.redis.host, port=services.redis.port)


if __name__ == "__main__":
    raise SystemExit(main())
