"""kill -9 of the disk tier's mover mid-move, again and again: nothing lost, nothing twice, counters exact.

A crawl queues URLS requests over DOMAINS domains with a small window, so most of them are in the
tail; more are enqueued while a consumer leases and acks at a steady pace. A mover process
(utils/frontier/tier.py, as the redis monitor runs it) is started and killed with SIGKILL after a
random moment, KILLS times; after each kill the state is read to tell whether the kill landed
mid-move (a ledger entry left, or spill entries both in the stream and on disk). Then one mover
runs to the end and the consumer empties the frontier. Checks: every URL leased exactly once, the
crawl's progress exact (queued 0, inflight 0, crawled = enqueued = URLs), the tail table empty.
Run: `python -m bench.tier_kill [--kills 20] [--urls 20000]`.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import redis

from bench.common import print_checks, write_result
from tests.support.postgres import start_postgres
from tests.support.tier import tier_dsn
from utils.frontier import Ack, Frontier, NewRequest, ThrottlePolicy, crawl_request, keys
from utils.frontier.fingerprint import fingerprint
from utils.frontier.progress import CrawlRef, read
from utils.frontier.tier import DiskTier
from utils.services import start_local_services

WINDOW = 10
DOMAINS = 40
TABLE = "frontier_tail"
OPEN = ThrottlePolicy(hits=0)
READY = "bench:mover:rounds"  # counted by the mover after each round


def request(i: int) -> NewRequest:
    domain = f"d{i % DOMAINS}.example"
    url = f"http://{domain}/page/{i}"
    record = crawl_request.to_record({"url": url, "appid": "app", "crawlid": "kill", "spiderid": "link",
                                      "priority": 1 + i % 3})  # fmt: skip
    return NewRequest("link", domain, 1 + i % 3, "app", "kill", fingerprint=fingerprint(url),
                      **crawl_request.encode(record)._asdict())  # fmt: skip


def run_mover(host: str, port: int, dsn: str) -> None:
    """The mover process: rounds back to back until killed."""
    disk = DiskTier(redis.Redis(host=host, port=port, decode_responses=True), dsn, WINDOW, table=TABLE)
    while True:
        moved = disk.round(["link"], time.time())
        disk.client.incr(READY)
        if not moved:
            time.sleep(0.01)


def start_mover(client: redis.Redis, host: str, port: int, dsn: str) -> subprocess.Popen[bytes]:
    """A mover process, once it finished its first round (its start-up is seconds on a busy machine)."""
    client.delete(READY)
    mover = subprocess.Popen([sys.executable, "-m", "bench.tier_kill", "--mover", host, str(port), dsn])
    deadline = time.monotonic() + 120
    while not client.exists(READY) and time.monotonic() < deadline:
        time.sleep(0.05)
    return mover


def consume(frontier: Frontier, leased: Counter[str], n: int) -> int:
    got = frontier.pop("link", n, OPEN).leases
    frontier.ack([Ack.of(lease) for lease in got])
    leased.update(lease.record["url"] for lease in got)
    return len(got)


def mid_move(client: redis.Redis, disk: DiskTier) -> str:
    """What the killed mover left half-done: 'ledger', 'copied' (stream entries on disk too) or ''."""
    if client.hlen(keys.tier_ledger("link")):
        return "ledger"
    entries = client.xrange(keys.tier_spill("link"), count=50)
    if entries:
        with disk.store.conn.cursor() as cur:
            members = [f["m"] for _, f in entries]
            found = cur.execute(f"SELECT count(*) FROM {TABLE} WHERE member = ANY(%s)", (members,)).fetchone()
        disk.store.conn.rollback()
        if found and found[0]:
            return "copied"
    return ""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--kills", type=int, default=20)
    parser.add_argument("--urls", type=int, default=20_000)
    parser.add_argument("--mover", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.mover:
        run_mover(args.mover[0], int(args.mover[1]), args.mover[2])
        return 0
    rng = random.Random(41)
    with tempfile.TemporaryDirectory(prefix="shoal-bench-") as tmp:
        services = start_local_services(Path(tmp), services=("redis",))
        server, root = start_postgres()
        try:
            dsn = tier_dsn(server)
            host, port = services.redis.host, services.redis.port
            client = redis.Redis(host=host, port=port, decode_responses=True)
            frontier = Frontier(redis.Redis(host=host, port=port), window=WINDOW, lease_timeout=300)
            observer = DiskTier(client, dsn, WINDOW, table=TABLE)
            observer.store.conn.rollback()
            half = args.urls // 2
            for start in range(0, half, 1000):
                assert set(frontier.enqueue([request(i) for i in range(start, min(start + 1000, half))])) == {"queued"}
            leased: Counter[str] = Counter()
            landed: Counter[str] = Counter()
            fed = half
            for _ in range(args.kills):
                mover = start_mover(client, host, port, dsn)
                deadline = time.monotonic() + rng.uniform(0.3, 2.0)
                while time.monotonic() < deadline:
                    if fed < args.urls:
                        batch = [request(i) for i in range(fed, min(fed + 200, args.urls))]
                        assert set(frontier.enqueue(batch)) == {"queued"}
                        fed += len(batch)
                    consume(frontier, leased, 50)
                os.kill(mover.pid, signal.SIGKILL)
                mover.wait()
                landed[mid_move(client, observer) or "between moves"] += 1
            while fed < args.urls:
                batch = [request(i) for i in range(fed, min(fed + 1000, args.urls))]
                assert set(frontier.enqueue(batch)) == {"queued"}
                fed += len(batch)
            mover = start_mover(client, host, port, dsn)
            deadline = time.monotonic() + 600
            while len(leased) < args.urls and time.monotonic() < deadline:
                if not consume(frontier, leased, 200):
                    time.sleep(0.02)
            time.sleep(1.0)  # anything leased twice would come now
            consume(frontier, leased, 200)
            os.kill(mover.pid, signal.SIGKILL)
            mover.wait()
            progress = read(client, CrawlRef("link", "app", "kill"))
            counters = dict(progress.counters) if progress else {}
            rows = observer.store.count()
            observer.close()
        finally:
            server.service.stop()
            services.stop_all()
    twice = sum(1 for n in leased.values() if n > 1)
    figures: dict[str, Any] = {
        "urls": args.urls, "window": WINDOW, "domains": DOMAINS, "kills": args.kills,
        "kills_landed": dict(landed), "leased_distinct": len(leased), "leased_twice": twice,
        "progress": {k: counters.get(k, 0) for k in ("enqueued", "queued", "inflight", "crawled")},
        "rows_left_on_disk": rows, "load_average": [round(v, 1) for v in os.getloadavg()],
    }  # fmt: skip
    print(figures)
    checks = {
        "every URL leased": len(leased) == args.urls,
        "no URL leased twice": twice == 0,
        "progress exact (queued 0, inflight 0, crawled = enqueued = URLs)": (
            counters.get("queued", 0), counters.get("inflight", 0), counters.get("crawled"), counters.get("enqueued")
        ) == (0, 0, args.urls, args.urls),
        "tail table empty": rows == 0,
        "some kills landed mid-move": sum(n for k, n in landed.items() if k != "between moves") > 0,
    }  # fmt: skip
    print_checks(checks)
    write_result("tier_kill", figures, checks)
    shutil.rmtree(root, ignore_errors=True)
    return 0 if all(checks.values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
