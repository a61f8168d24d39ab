"""Issue 16: the frontier's leases/s against the politeness-allowed rate, for 100 to 100,000 domains.

For each N, one Redis holds N domains with PER_DOMAIN queued requests each at the same priority
(enough for the burst, half an interval and the measured intervals), and one
client pops as a crawler does (batches of SCHEDULER_POP_BATCH through the real `Frontier`):
- throttle off: how fast one client can pop at all (the queues drain);
- the default throttle (QUEUE_HITS per QUEUE_WINDOW, moderated): leases/s in the steady state after
  one interval (the first requests of every domain are due at once), against N x hits / window.
When one client cannot pop as fast as the throttle allows (the throttle-off rate is below N x hits /
window), the target is the throttle-off rate itself, and the two are compared on the same machine
at the same moments: the throttled pops alternate, in slices of SLICE seconds, with throttle-off
pops of a second spider holding the same N domains in the same Redis (a shared VM's speed drifts
by a third within minutes, more than the difference measured). The first, separate throttle-off
run is reported too.
Each pop's Redis time comes from SLOWLOG (every command logged during the measured phase), so the
figure is the script's own cost, without the client. Targets: throttled leases/s >= 0.95 x
min(allowed, throttle-off rate); the pop's p50 Redis time per leased request at the largest N
within 1.5x of that at 100 domains (a pop at 100 domains leases ~1, at 100,000 a full batch).
Run: `python -m bench.frontier_scale [--domains 100 1000 10000 100000] [--measure 12]`.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path
from typing import Any

import redis

from bench.common import percentile, print_checks, write_result
from utils.config.settings import Settings, default_values
from utils.frontier import Frontier, NewRequest, ThrottlePolicy, crawl_request
from utils.frontier.fingerprint import fingerprint
from utils.services import start_local_services

SPIDER = "link"
OPEN_SPIDER = "open"  # the throttle-off spider the throttled pops alternate with
SLICE = 0.5  # seconds of one mode before the other
PER_DOMAIN = 7
_DEFAULTS = Settings(default_values())
POP_BATCH = _DEFAULTS.get_int("SCHEDULER_POP_BATCH")
SCAN_LIMIT = _DEFAULTS.get_int("SCHEDULER_SCAN_LIMIT")
HITS, WINDOW = _DEFAULTS.get_int("QUEUE_HITS"), _DEFAULTS.get_float("QUEUE_WINDOW")
THROTTLED = ThrottlePolicy(key_prefix="link:", hits=HITS, window=WINDOW, moderated=True)
OPEN = ThrottlePolicy(hits=0)


def fill(frontier: Frontier, domains: int, spider: str = SPIDER) -> None:
    """`domains` domains x PER_DOMAIN requests of `spider`, same priority, in enqueue batches of 2,000."""
    batch: list[NewRequest] = []
    for i in range(PER_DOMAIN):
        for d in range(domains):
            domain = f"d{d}.bench.test"
            url = f"http://{domain}/page/{i}.html"
            record = crawl_request.to_record({"url": url, "appid": "bench", "crawlid": "scale", "spiderid": spider})
            stored = crawl_request.encode(record)._asdict()
            batch.append(NewRequest(spider, domain, 1, "bench", "scale", fingerprint=fingerprint(url), **stored))
            if len(batch) == 2000:
                frontier.enqueue(batch)
                batch = []
    if batch:
        frontier.enqueue(batch)


def pop_for(
    frontier: Frontier, policy: ThrottlePolicy, seconds: float, sizes: list[int] | None = None, spider: str = SPIDER
) -> tuple[int, int, float]:
    """Pop as fast as one client can for `seconds` (or until nothing is left): (leases, pops, elapsed);
    each pop's number of leases is appended to `sizes`."""
    leases = pops = 0
    started = time.monotonic()
    while time.monotonic() - started < seconds:
        popped = frontier.pop(spider, POP_BATCH, policy, SCAN_LIMIT)
        pops += 1
        leases += len(popped.leases)
        if sizes is not None:
            sizes.append(len(popped.leases))
        if not popped.leases and popped.retry_after is None:
            break  # drained
        if not popped.leases and popped.retry_after:
            time.sleep(min(popped.retry_after, 0.01))
    return leases, pops, time.monotonic() - started


def pop_times(client: redis.Redis, sha: str, spider: str = SPIDER) -> list[float]:
    """Microseconds of every pop script call of `spider` SLOWLOG recorded, oldest first."""
    mine = []
    for entry in client.slowlog_get(10_000_000):
        words = entry["command"].split()  # EVALSHA <sha> 1 <route> <spiderid> ...
        if len(words) > 4 and words[1] == sha.encode() and words[4] == spider.encode():
            mine.append(float(entry["duration"]))
    return mine[::-1]


def per_lease(times: list[float], sizes: list[int]) -> list[float]:
    return [us / n for us, n in zip(times, sizes, strict=False) if n]


def alternate(frontier: Frontier, seconds: float, throttled: list[int], opened: list[int]) -> dict[str, float]:
    """Throttled pops of SPIDER and throttle-off pops of OPEN_SPIDER in turns of SLICE seconds, for
    `seconds` of each: leases and seconds of each mode."""
    got = {"leases": 0.0, "elapsed": 0.0, "off_leases": 0.0, "off_elapsed": 0.0}
    while got["elapsed"] < seconds:
        leases, _, elapsed = pop_for(frontier, THROTTLED, SLICE, throttled)
        got["leases"] += leases
        got["elapsed"] += elapsed
        leases, _, elapsed = pop_for(frontier, OPEN, SLICE, opened, spider=OPEN_SPIDER)
        got["off_leases"] += leases
        got["off_elapsed"] += elapsed
    return got


def measure(client: redis.Redis, domains: int, measure_s: float) -> dict[str, Any]:
    client.flushall()
    frontier = Frontier(client, lease_timeout=3600)
    fill(frontier, domains)
    off_leases, _, off_elapsed = pop_for(frontier, OPEN, 30.0)
    first_off_rate = off_leases / off_elapsed
    allowed = domains * HITS / WINDOW
    client_bound = first_off_rate < allowed
    client.flushall()
    frontier = Frontier(client, lease_timeout=3600)
    fill(frontier, domains)
    if client_bound:
        fill(frontier, domains, OPEN_SPIDER)
    interval = WINDOW / HITS
    began = burst_done = time.monotonic()
    # Every first request is due at once: the burst ends with a short batch, or after an interval
    # when the client cannot pop as fast as the throttle allows.
    while len(frontier.pop(SPIDER, POP_BATCH, THROTTLED, SCAN_LIMIT).leases) == POP_BATCH:
        burst_done = time.monotonic()
        if burst_done - began > interval:
            break
    # Measured from half an interval after the burst, for whole intervals: each domain's later
    # requests fall due once per interval, so the window holds exactly measure/interval of them.
    pop_for(frontier, THROTTLED, burst_done + interval / 2 - time.monotonic())
    client.config_set("slowlog-max-len", 2_000_000)
    client.config_set("slowlog-log-slower-than", 0)
    client.slowlog_reset()
    sizes: list[int] = []
    off_sizes: list[int] = []
    if client_bound:
        got = alternate(frontier, measure_s, sizes, off_sizes)
        leases, elapsed = int(got["leases"]), got["elapsed"]
        off_rate = got["off_leases"] / got["off_elapsed"]
    else:
        leases, _, elapsed = pop_for(frontier, THROTTLED, measure_s, sizes)
        off_rate = first_off_rate
    client.config_set("slowlog-log-slower-than", 10_000)
    times = pop_times(client, frontier.scripts.pop.sha)
    lease_times = per_lease(times, sizes)
    off_lease_times = per_lease(pop_times(client, frontier.scripts.pop.sha, OPEN_SPIDER), off_sizes)
    client.slowlog_reset()
    rate = leases / elapsed
    return {
        "domains": domains,
        "allowed_per_s": round(allowed, 1),
        "throttle_off_per_s": round(off_rate, 1),
        "throttle_off_alone_per_s": round(first_off_rate, 1),
        "off_measured": "alternating slices" if client_bound else "alone, before",
        "leases_per_s": round(rate, 1),
        "ratio": round(rate / min(allowed, off_rate), 3),
        "pops": len(sizes),
        "pop_p50_us": percentile(times, 50) if times else None,
        "pop_p99_us": percentile(times, 99) if times else None,
        "per_lease_p50_us": round(percentile(lease_times, 50), 1) if lease_times else None,
        "per_lease_p99_us": round(percentile(lease_times, 99), 1) if lease_times else None,
        "off_per_lease_p50_us": round(percentile(off_lease_times, 50), 1) if off_lease_times else None,
        "mean_batch": round(leases / max(1, sum(1 for n in sizes if n)), 2),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--domains", type=int, nargs="+", default=[100, 1000, 10_000, 100_000])
    parser.add_argument(
        "--measure",
        type=float,
        default=4 * WINDOW / HITS,
        help="seconds of steady state measured per N (whole throttle intervals)",
    )
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="shoal-bench-") as tmp:
        services = start_local_services(Path(tmp), services=["redis"])
        try:
            client = redis.Redis(host="127.0.0.1", port=services.redis.port)
            for n in args.domains:
                row = measure(client, n, args.measure)
                rows.append(row)
                print(
                    f"N={n:>7}: {row['leases_per_s']:>9} leases/s, allowed {row['allowed_per_s']:>9}, "
                    f"throttle off {row['throttle_off_per_s']:>9} ({row['off_measured']}; alone "
                    f"{row['throttle_off_alone_per_s']}), ratio {row['ratio']}, pop p50 {row['pop_p50_us']} us, "
                    f"p99 {row['pop_p99_us']} us, per lease p50 {row['per_lease_p50_us']} us, p99 "
                    f"{row['per_lease_p99_us']} us (throttle off: {row['off_per_lease_p50_us']} us)",
                    flush=True,
                )
        finally:
            services.stop_all()
    smallest, largest = rows[0], rows[-1]
    # A pop at 100 domains leases one request (16.7 fall due per second), at 100,000 a full batch:
    # the cost compared is the pop's Redis time per leased request.
    p50_ratio = (largest["per_lease_p50_us"] or 0) / max(smallest["per_lease_p50_us"] or 1, 1)
    figures: dict[str, Any] = {f"n{r['domains']}": r for r in rows}
    figures["pop_p50_ratio_largest_vs_smallest"] = round(p50_ratio, 2)
    checks = {f"leases >= 0.95x min(allowed, throttle-off) at N={r['domains']}": r["ratio"] >= 0.95 for r in rows}
    checks["pop p50 per lease at the largest N <= 1.5x at the smallest"] = p50_ratio <= 1.5
    print(f"pop p50 per lease, N={largest['domains']} vs N={smallest['domains']}: {p50_ratio:.2f}x")
    print_checks(checks)
    write_result("frontier_scale", figures, checks)
    return 0 if all(checks.values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
