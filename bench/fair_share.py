"""Issue 42: fair shares between crawls that meet on the same hosts (utils/frontier/lua/lib/fair.lua).

The frontier's own order is measured: a simulated crawler pops through the real `Frontier` under a
throttle and holds each lease for a fetch time in a fixed number of slots (no page is fetched, so
the figures are the scheduling's, not a web server's). Phases, on one Redis and on a Redis Cluster
(three masters):
- backlog: a crawl of one page on each of HOSTS hosts is fed behind another app's backlog on the
  same hosts at the same priority. Its time from feed to last lease is compared with the time its
  pages take at its fair share of the hosts (half their rate: 2 / RATE s); target <= 2x. Arrival order
  (first in, first out) would make it wait for the backlog: backlog / (HOSTS x rate) seconds.
- weights: three crawls of weights 1, 2 and 4 on the same hosts, saturated for --seconds: their
  leases must be within +-10 % of 1:2:4.
- apps: three apps of weights 1, 2 and 4 (their ZooKeeper entries, through the copy the redis
  monitors keep) on disjoint host sets, crawler slots the bottleneck: leases per app against 1:2:4
  (pop.lua shares the slots between apps, APP_SLOT_SHARES).
- crawls: the pop's Redis time per lease (SLOWLOG) with the queued requests spread over 1, 100 and
  10,000 live crawls, in --pop-rounds interleaved rounds: flat in the number of crawls (each round's
  10,000-vs-100 ratio, the median of the rounds with their spread; a ratio within one round cancels
  the machine's other load better than p50s from far apart).
Run: `python -m bench.fair_share [--backlog 200000] [--seconds 30] [--apps-rounds 3] [--pop-rounds 3]
[--only-apps | --only-pop] [--no-cluster]`.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import redis
import ujson

from bench.common import percentile, print_checks, write_result
from bench.frontier_scale import pop_times
from utils.frontier import Ack, Frontier, Lease, NewRequest, ThrottlePolicy, crawl_request, keys
from utils.frontier.fingerprint import fingerprint
from utils.services import start_local_services
from utils.services.redis_cluster import start_redis_cluster

SPIDER = "link"
HOSTS = 100
RATE = 4.0  # pages/s each host allows (moderated throttle)
POP_BATCH = 100
FEED_BATCH = 500


def policy(rate: float) -> ThrottlePolicy:
    return ThrottlePolicy(key_prefix=f"{SPIDER}:", hits=int(rate * 10), window=10.0, moderated=True)


def request(appid: str, crawlid: str, host: str, i: int, weight: float | None = None) -> NewRequest:
    url = f"http://{host}/{crawlid}/{i}.html"
    fields: dict[str, Any] = {"url": url, "appid": appid, "crawlid": crawlid, "spiderid": SPIDER}
    if weight is not None:
        fields["weight"] = weight
    stored = crawl_request.encode(crawl_request.to_record(fields))._asdict()
    return NewRequest(SPIDER, host, 1, appid, crawlid, fingerprint=fingerprint(url), **stored)


def feed(frontier: Frontier, requests: list[NewRequest]) -> float:
    """Enqueue in batches; requests/s. A batch sent again after a client timeout (a loaded machine)
    comes back `duplicate`: it was queued the first time."""
    started = time.monotonic()
    for start in range(0, len(requests), FEED_BATCH):
        statuses = frontier.enqueue(requests[start : start + FEED_BATCH])
        assert set(statuses) <= {"queued", "duplicate"}, Counter(statuses)
    return len(requests) / max(time.monotonic() - started, 1e-9)


def backlog_requests(n: int, hosts: list[str], appid: str, crawlid: str,
                     weight: float | None = None) -> list[NewRequest]:  # fmt: skip
    return [request(appid, crawlid, hosts[i % len(hosts)], i // len(hosts), weight) for i in range(n)]


class Crawler:
    """`slots` leases at once, each held `fetch` seconds and acked; pops as slots free up."""

    def __init__(self, frontier: Frontier, throttle: ThrottlePolicy, slots: int = 10_000, fetch: float = 0.0) -> None:
        self.frontier, self.throttle, self.slots, self.fetch = frontier, throttle, slots, fetch
        self.held: list[tuple[float, Lease]] = []
        self.served: list[tuple[float, Lease]] = []

    def step(self) -> None:
        now = time.monotonic()
        done = [lease for at, lease in self.held if at <= now]
        if done:
            self.held = [(at, lease) for at, lease in self.held if at > now]
            self.frontier.ack([Ack.of(lease) for lease in done])
        free = min(POP_BATCH, self.slots - len(self.held))
        popped = self.frontier.pop(SPIDER, free, self.throttle) if free > 0 else None
        leases = popped.leases if popped else []
        now = time.monotonic()
        # fetches take 0.5x to 1.5x `fetch`, as pages do: slots free up one by one, not in waves
        self.held.extend((now + self.fetch * (0.5 + (hash(lease.request_id) % 1000) / 1000), lease)
                         for lease in leases)  # fmt: skip
        self.served.extend((now, lease) for lease in leases)
        if not leases:
            time.sleep(0.002)

    def run_until(self, done: Any, timeout: float) -> float:
        started = time.monotonic()
        while not done() and time.monotonic() - started < timeout:
            self.step()
        return time.monotonic() - started


def small_crawl_time(client: Any, backlog: int, rate: float, timeout: float) -> dict[str, Any]:
    """Seconds from feeding a one-page-per-host crawl to its last lease, behind `backlog` requests of
    another app on the same hosts, the hosts allowing `rate` pages/s each."""
    flush(client)
    frontier = Frontier(client, lease_timeout=3600)
    hosts = [f"h{i}.fair.test" for i in range(HOSTS)]
    fed_per_s = feed(frontier, backlog_requests(backlog, hosts, "bulk", "backlog"))
    crawler = Crawler(frontier, policy(rate))
    crawler.run_until(lambda: False, 3.0)  # the backlog is being crawled when the small crawl comes
    fed_at = time.monotonic()
    feed(frontier, [request("small", "few", host, 0) for host in hosts])

    def small_done() -> bool:
        return sum(1 for _, lease in crawler.served if lease.record["crawlid"] == "few") >= HOSTS

    elapsed = crawler.run_until(small_done, timeout)
    last = max((at for at, lease in crawler.served if lease.record["crawlid"] == "few"), default=fed_at + elapsed)
    return {"seconds": round(last - fed_at, 3), "backlog_fed_per_s": round(fed_per_s), "complete": small_done()}


def weights_on_shared_hosts(client: Any, seconds: float) -> dict[str, Any]:
    flush(client)
    frontier = Frontier(client, lease_timeout=3600)
    hosts = [f"s{i}.fair.test" for i in range(10)]
    per_crawl = int(10 * 4 * RATE * seconds * 4 / 7 * 1.3) + 100  # the weight-4 crawl never runs dry
    for crawlid, weight in (("w1", 1), ("w2", 2), ("w4", 4)):
        feed(frontier, backlog_requests(per_crawl, hosts, "bench", crawlid, weight))
    crawler = Crawler(frontier, policy(4 * RATE))
    crawler.run_until(lambda: False, 2.0)  # past the first burst (every host due at once)
    crawler.served.clear()
    crawler.run_until(lambda: False, seconds)
    return shares(Counter(lease.record["crawlid"] for _, lease in crawler.served), {"w1": 1, "w2": 2, "w4": 4})


def weights_across_apps(client: Any, seconds: float) -> dict[str, Any]:
    flush(client)
    weights = {"a1": 1, "a2": 2, "a4": 4}
    client.hset(keys.APPS_QUOTAS, mapping={app: ujson.dumps({"weight": w}) for app, w in weights.items()})
    frontier = Frontier(client, lease_timeout=3600)
    slots, fetch = 40, 0.8  # 50 pages/s; each app's 20 hosts would allow 320
    for app in weights:
        hosts = [f"{app}-{i}.fair.test" for i in range(20)]
        feed(frontier, backlog_requests(int(slots / fetch * seconds) + 100, hosts, app, "crawl"))
    crawler = Crawler(frontier, policy(4 * RATE), slots=slots, fetch=fetch)
    crawler.run_until(lambda: False, 2.0)
    crawler.served.clear()
    crawler.run_until(lambda: False, seconds)
    return shares(Counter(lease.record["appid"] for _, lease in crawler.served), weights)


def apps_rounds(client: Any, seconds: float, rounds: int) -> dict[str, Any]:
    """The apps phase `rounds` times: each round's figures with the load average, the median and the
    spread (lowest, highest) of each app's leases over its share; the target is judged on the medians."""
    runs = []
    for _ in range(rounds):
        got = weights_across_apps(client, seconds)
        runs.append({**got, "load_average": [float(v) for v in Path("/proc/loadavg").read_text().split()[:3]]})
    apps = runs[0]["over_share"]
    median = {app: sorted(run["over_share"][app] for run in runs)[len(runs) // 2] for app in apps}
    spread = {app: [min(run["over_share"][app] for run in runs), max(run["over_share"][app] for run in runs)]
              for app in apps}  # fmt: skip
    leases = sum((Counter(run["leases"]) for run in runs), Counter())
    return {"rounds": runs, "leases": dict(leases), "over_share": median, "over_share_spread": spread,
            "within_10pct": all(abs(v - 1) <= 0.10 for v in median.values())}  # fmt: skip


def shares(counts: Counter[str], weights: dict[str, int]) -> dict[str, Any]:
    """Leases per flow, and each flow's leases over its weighted share (1.0 = exact)."""
    total, weight_sum = sum(counts.values()), sum(weights.values())
    off = {k: round(counts[k] / (total * w / weight_sum), 3) if total else 0.0 for k, w in weights.items()}
    return {"leases": dict(counts), "over_share": off, "within_10pct": all(abs(v - 1) <= 0.10 for v in off.values())}


def pop_cost_by_crawls(client: redis.Redis, crawls: int) -> dict[str, Any]:
    """Per-lease Redis time of throttle-off pops, 1,000 hosts x 10 requests over `crawls` crawls."""
    client.flushall()
    frontier = Frontier(client, lease_timeout=3600)
    reqs = [request("bench", f"c{(h * 10 + i) % crawls}", f"p{h}.fair.test", i) for i in range(10) for h in range(1000)]
    feed(frontier, reqs)
    client.config_set("slowlog-max-len", 2_000_000)
    client.config_set("slowlog-log-slower-than", 0)
    client.slowlog_reset()
    sizes = []
    while True:
        popped = frontier.pop(SPIDER, 8, ThrottlePolicy(hits=0))
        if not popped.leases:
            break
        sizes.append(len(popped.leases))
    client.config_set("slowlog-log-slower-than", 10_000)
    times = pop_times(client, frontier.scripts.pop.sha)
    client.slowlog_reset()
    per_lease = [us / n for us, n in zip(times, sizes, strict=False) if n]
    return {"crawls": crawls, "pops": len(sizes), "per_lease_p50_us": round(percentile(per_lease, 50), 2),
            "per_lease_p90_us": round(percentile(per_lease, 90), 2)}  # fmt: skip


CRAWL_COUNTS = (1, 100, 10_000)


def pop_cost_rounds(client: redis.Redis, rounds: int) -> dict[str, Any]:
    """`pop_cost_by_crawls` for every crawl count, the counts interleaved in each of `rounds` rounds."""
    runs = [[pop_cost_by_crawls(client, n) for n in CRAWL_COUNTS] for _ in range(rounds)]
    p50 = {n: [run[i]["per_lease_p50_us"] for run in runs] for i, n in enumerate(CRAWL_COUNTS)}
    ratios = {f"{high}_vs_{low}": [round(b / a, 3) for a, b in zip(p50[low], p50[high], strict=True)]
              for low, high in ((100, 10_000), (1, 10_000))}  # fmt: skip
    return {
        "rounds": runs,
        "per_lease_p50_us_median": {n: statistics.median(values) for n, values in p50.items()},
        "per_lease_p50_us_spread": {n: [min(values), max(values)] for n, values in p50.items()},
        "ratio_median": {name: round(statistics.median(values), 2) for name, values in ratios.items()},
        "ratio_spread": {name: [min(values), max(values)] for name, values in ratios.items()},
    }


def flush(client: Any) -> None:
    if isinstance(client, redis.RedisCluster):
        client.flushall(target_nodes=redis.RedisCluster.PRIMARIES)
    else:
        client.flushall()


def backend_phases(client: Any, args: argparse.Namespace) -> dict[str, Any]:
    if args.only_apps:
        return {"weights_across_apps": apps_rounds(client, args.seconds, args.apps_rounds)}
    alone = 1 / (RATE / 2)  # its page on each host, at half the host's rate (two crawls of weight 1)
    shared = small_crawl_time(client, args.backlog, RATE, 120.0)
    return {
        "small_alone_at_fair_share_s": alone,
        "small_behind_backlog_s": shared["seconds"],
        "small_complete": shared["complete"],
        "behind_vs_alone": round(shared["seconds"] / alone, 2),
        "backlog": args.backlog,
        "backlog_fed_per_s": shared["backlog_fed_per_s"],
        "fifo_would_wait_s": round(args.backlog / (HOSTS * RATE), 1),
        "weights_shared_hosts": weights_on_shared_hosts(client, args.seconds),
        "weights_across_apps": apps_rounds(client, args.seconds, args.apps_rounds),
    }


def report(name: str, got: dict[str, Any]) -> None:
    apps = got["weights_across_apps"]
    print(f"[{name}] apps 1:2:4 on disjoint hosts, {len(apps['rounds'])} rounds: median over weighted share "
          f"{apps['over_share']}, spread {apps['over_share_spread']}, load averages "
          f"{[run['load_average'][0] for run in apps['rounds']]}", flush=True)
    if "backlog" not in got:
        return
    print(f"[{name}] small crawl behind a {got['backlog']:,} backlog: {got['small_behind_backlog_s']} s, alone at its "
          f"fair share {got['small_alone_at_fair_share_s']} s ({got['behind_vs_alone']}x; first in first out would "
          f"wait ~{got['fifo_would_wait_s']} s); backlog fed at {got['backlog_fed_per_s']:,}/s", flush=True)
    for phase in ("weights_shared_hosts", "weights_across_apps"):
        print(f"[{name}] {phase}: leases {got[phase]['leases']}, over weighted share {got[phase]['over_share']}",
              flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--backlog", type=int, default=200_000, help="requests of the other app (issue: 1,000,000)")
    parser.add_argument("--seconds", type=float, default=30.0, help="seconds of saturated crawling per weight phase")
    parser.add_argument("--no-cluster", action="store_true", help="one Redis only")
    parser.add_argument("--apps-rounds", type=int, default=1, help="rounds of the apps phase (median, spread)")
    parser.add_argument("--pop-rounds", type=int, default=3, help="interleaved rounds of the pop cost by crawls")
    only = parser.add_mutually_exclusive_group()
    only.add_argument("--only-apps", action="store_true", help="the apps phase only (no backlog, weights, pop cost)")
    only.add_argument("--only-pop", action="store_true", help="the pop cost by crawls only, on one Redis")
    args = parser.parse_args()
    figures: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="shoal-bench-") as tmp:
        services = start_local_services(Path(tmp) / "one", services=["redis"])
        try:
            client = redis.Redis(host="127.0.0.1", port=services.redis.port)
            if not args.only_pop:
                figures["redis"] = backend_phases(client, args)
                report("redis", figures["redis"])
            if not args.only_apps:
                cost = figures["pop_cost_by_crawls"] = pop_cost_rounds(client, args.pop_rounds)
                print(f"pop Redis time per lease by live crawls, median of {args.pop_rounds} rounds: "
                      f"{cost['per_lease_p50_us_median']} us (spread {cost['per_lease_p50_us_spread']}); "
                      f"ratios {cost['ratio_median']} (spread {cost['ratio_spread']})", flush=True)  # fmt: skip
        finally:
            services.stop_all()
        if not args.no_cluster and not args.only_pop:
            cluster = start_redis_cluster(Path(tmp) / "cluster")
            try:
                figures["redis_cluster"] = backend_phases(cluster.client(), args)
                report("redis-cluster", figures["redis_cluster"])
            finally:
                cluster.stop()
    checks = {}
    for backend in ("redis", "redis_cluster"):
        if backend in figures:
            got = figures[backend]
            apps = got["weights_across_apps"]
            checks[f"{backend}: apps 1:2:4 across disjoint hosts within 10 % (median)"] = apps["within_10pct"]
            if args.only_apps:
                continue
            checks[f"{backend}: small crawl behind the backlog <= 2x alone at its fair share"] = (
                got["small_complete"] and got["behind_vs_alone"] <= 2.0)  # fmt: skip
            shared = got["weights_shared_hosts"]
            checks[f"{backend}: weights 1:2:4 on shared hosts within 10 %"] = shared["within_10pct"]
    if not args.only_apps:
        ratio = figures["pop_cost_by_crawls"]["ratio_median"]["10000_vs_100"]
        checks["pop per lease at 10,000 crawls <= 1.2x at 100 (median of the rounds' ratios)"] = ratio <= 1.2
    print_checks(checks)
    name = "fair_share_apps" if args.only_apps else "fair_share_pop" if args.only_pop else "fair_share"
    write_result(name, figures, checks)
    return 0 if all(checks.values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
