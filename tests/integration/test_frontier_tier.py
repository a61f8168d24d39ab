"""The disk tier on real Redis (and Redis Cluster) and PostgreSQL: a window per domain in Redis, the
tail on disk, refilled in queue order; info, stop and the counters over both tiers; a mover killed
between its steps loses and doubles nothing."""

from __future__ import annotations

import random
from collections.abc import Iterator
from typing import Any

import pytest
import redis

from redis_monitor.crawl_info import crawl_view
from redis_monitor.purge import Purger
from tests.support.frontier_keys import crawl_counters, every_key, shard_sum
from tests.support.postgres import Postgres
from tests.support.tier import disk_tier
from utils.frontier import Ack, Frontier, NewRequest, ThrottlePolicy, crawl_request, keys, tier
from utils.frontier.fingerprint import fingerprint
from utils.frontier.progress import CrawlRef
from utils.frontier.tier import DiskTier

pytestmark = pytest.mark.integration
OPEN = ThrottlePolicy(hits=0)
WINDOW = 20
REF = CrawlRef("link", "app", "c1")


def new(url: str, domain: str, priority: int = 1, crawlid: str = "c1") -> NewRequest:
    record = crawl_request.to_record({"url": url, "appid": "app", "crawlid": crawlid, "spiderid": "link",
                                      "priority": priority, "attrs": {"k": "v"}})  # fmt: skip
    return NewRequest("link", domain, priority, "app", crawlid, fingerprint=fingerprint(url),
                      **crawl_request.encode(record)._asdict())  # fmt: skip


def requests(domains: list[str], per_domain: int, seed: int = 7) -> list[NewRequest]:
    """Requests of mixed priorities over `domains`, in a shuffled order."""
    rng = random.Random(seed)
    found = [new(f"http://{d}/{i}", d, priority=rng.choice([1, 5, 9])) for d in domains for i in range(per_domain)]
    rng.shuffle(found)
    return found


def queued(client: Any, domain: str) -> int:
    return shard_sum(client, "zcard", keys.queue("link", domain))


def drain_all(frontier: Frontier, disk: DiskTier, expected: int, batch: int = 7) -> list[Any]:
    """Pop and ack everything, a mover round between pops (as the redis monitor runs it)."""
    leases: list[Any] = []
    for _ in range(expected * 2):
        disk.round(["link"], 0.0)
        got = frontier.pop("link", batch, OPEN).leases
        frontier.ack([Ack.of(lease) for lease in got])
        leases += got
        if len(leases) >= expected and not got:
            break
    return leases


def service_order(leases: list[Any]) -> dict[str, list[tuple[int, str]]]:
    """Each domain's leases in the order they came: (priority, request id)."""
    out: dict[str, list[tuple[int, str]]] = {}
    for lease in leases:
        out.setdefault(lease.domain, []).append((int(lease.record["priority"]), lease.request_id))
    return out


@pytest.fixture
def disk(redis_db: redis.Redis, postgres: Postgres) -> Iterator[DiskTier]:
    made = disk_tier(redis_db, postgres, WINDOW)
    yield made
    made.close()


def test_a_deep_queue_keeps_its_window_in_redis_and_the_rest_on_disk(redis_db: redis.Redis, disk: DiskTier) -> None:
    frontier = Frontier(redis_db, window=WINDOW)
    assert set(frontier.enqueue(requests(["a.com", "b.com"], 60))) == {"queued"}
    assert queued(redis_db, "a.com") == queued(redis_db, "b.com") == WINDOW
    assert crawl_counters(redis_db, "link", "app", "c1")["queued"] == 120
    assert shard_sum(redis_db, "xlen", keys.tier_spill("link")) == 80
    line = tier.describe(redis_db, disk.shards)  # `shoal status`
    assert line == "disk tier: 80 requests on disk; 80 spilled, 0 refilled, 0 windows ran dry"
    disk.round(["link"], 0.0)
    assert shard_sum(redis_db, "xlen", keys.tier_spill("link")) == 0
    assert disk.store.count() == 80
    disk.store.conn.rollback()
    # every request in Redis comes before every one on disk, in the queue's own order
    for domain in ("a.com", "b.com"):
        window = [(-int(s), m) for m, s in disk.client.zrange(keys.queue(disk.shards.tag(domain) + "link", domain),
                                                              0, -1, withscores=True)]  # fmt: skip
        tail = disk.store.best(disk.shards.tag(domain) + "link", domain, 100)
        disk.store.conn.rollback()
        assert max((-p, m) for p, m in window) < min((s, m) for s, m, _ in tail)


def test_refills_keep_each_domains_order_and_no_window_runs_dry(redis_db: redis.Redis, disk: DiskTier) -> None:
    frontier = Frontier(redis_db, window=WINDOW)
    batch = requests(["a.com", "b.com", "c.com"], 70)
    assert set(frontier.enqueue(batch)) == {"queued"}
    more = [new(f"http://a.com/late{i}", "a.com", priority=9) for i in range(5)]  # better than most of the tail
    assert set(frontier.enqueue(more)) == {"queued"}
    leases = drain_all(frontier, disk, 215)
    assert len(leases) == 215
    assert len({lease.request_id + lease.domain for lease in leases}) == 215
    for domain, order in service_order(leases).items():
        assert [p for p, _ in order] == sorted((p for p, _ in order), reverse=True), domain
        for p in {p for p, _ in order}:
            ids = [i for q, i in order if q == p]
            assert ids == sorted(ids), (domain, p)  # FIFO within a priority
    assert disk.figures(["link"])["dry"] == 0
    counters = crawl_counters(redis_db, "link", "app", "c1")
    assert (counters["queued"], counters.get("inflight", 0), counters["crawled"]) == (0, 0, 215)
    assert disk.store.count() == 0


def test_info_counts_both_tiers_and_stop_removes_both(redis_db: redis.Redis, disk: DiskTier) -> None:
    frontier = Frontier(redis_db, window=WINDOW)
    assert set(frontier.enqueue(requests(["a.com", "b.com"], 50))) == {"queued"}
    assert set(frontier.enqueue([new(f"http://a.com/o{i}", "a.com", crawlid="c2") for i in range(30)])) == {"queued"}
    disk.round(["link"], 0.0)
    view = crawl_view(disk.client, REF, disk.shards, disk)
    assert view["total"] == 100
    assert view["domains"]["a.com"]["total"] == 50
    assert view["domains"]["a.com"]["high_priority"] == 9
    assert view["domains"]["a.com"]["low_priority"] == 1
    assert crawl_view(disk.client, CrawlRef("link", "app", "c2"), disk.shards, disk)["total"] == 30
    purger = Purger(disk.client, 3600, 86400, shards=disk.shards, disk=disk)
    assert purger.purge(REF, "stopped") == 100
    counters = crawl_counters(redis_db, "link", "app", "c1")
    assert (counters["queued"], counters["dropped_stopped"]) == (0, 100)
    assert crawl_view(disk.client, REF, disk.shards, disk)["total"] == 0
    left = drain_all(frontier, disk, 30)  # the other crawl is whole, in order
    assert len(left) == 30
    assert {lease.record["crawlid"] for lease in left} == {"c2"}
    assert crawl_counters(redis_db, "link", "app", "c2")["crawled"] == 30
    assert shard_sum(redis_db, "hlen", keys.tier_tails("link")) == 0


def test_expire_removes_the_tail_too(redis_db: redis.Redis, disk: DiskTier) -> None:
    frontier = Frontier(redis_db, window=WINDOW)
    assert set(frontier.enqueue(requests(["a.com"], 45))) == {"queued"}
    purger = Purger(disk.client, 3600, 86400, shards=disk.shards, disk=disk)
    assert purger.purge(REF, "expired") == 45  # part of the tail still in the spill stream
    counters = crawl_counters(redis_db, "link", "app", "c1")
    assert (counters["queued"], counters["dropped_expired"]) == (0, 45)
    assert disk.store.count() == 0
    assert queued(redis_db, "a.com") == 0


def test_a_refill_killed_before_its_commit_loses_and_doubles_nothing(
    redis_db: redis.Redis, disk: DiskTier, postgres: Postgres
) -> None:
    frontier = Frontier(redis_db, window=WINDOW)
    assert set(frontier.enqueue(requests(["a.com"], 80))) == {"queued"}
    disk.round(["link"], 0.0)
    leases = frontier.pop("link", 15, OPEN).leases  # the window falls under half: listed for a refill
    frontier.ack([Ack.of(lease) for lease in leases])
    sid = disk.shards.tag("a.com") + "link"
    # the refill's steps by hand, then the process "dies" before PostgreSQL commits its DELETE
    rows = disk.store.best(sid, "a.com", WINDOW - 5)
    args = [sid, "batch-1", "a.com", len(rows), *(v for s, m, p in rows for v in (repr(s), m, p))]
    assert disk.refill_script(keys=[keys.shard_route(disk.shards.tag("a.com"))], args=args) == [len(rows)]  # fmt: skip
    disk.store.delete(sid, [("a.com", m) for _, m, _ in rows])
    disk.store.conn.close()  # never committed: the rows are in Redis and still on disk
    successor = disk_tier(redis_db, postgres, WINDOW, table=disk.table)
    assert successor.store.count(sid) == 60
    successor.store.conn.rollback()
    leases += drain_all(frontier, successor, 65)
    assert len(leases) == 80
    assert len({lease.request_id for lease in leases}) == 80
    assert crawl_counters(redis_db, "link", "app", "c1")["crawled"] == 80
    assert successor.store.count() == 0
    successor.close()


def test_a_drain_killed_before_its_trim_adds_nothing_twice(
    redis_db: redis.Redis, disk: DiskTier, postgres: Postgres
) -> None:
    frontier = Frontier(redis_db, window=WINDOW)
    assert set(frontier.enqueue(requests(["a.com"], 50))) == {"queued"}
    sid = disk.shards.tag("a.com") + "link"
    entries = disk.client.xrange(keys.tier_spill(sid))
    disk.store.insert((sid, f["d"], float(f["s"]), f["m"], f["c"], f["p"]) for _, f in entries)
    disk.store.conn.commit()
    disk.store.conn.close()  # dies before the stream is trimmed
    successor = disk_tier(redis_db, postgres, WINDOW, table=disk.table)
    leases = drain_all(frontier, successor, 50)
    assert len(leases) == 50
    assert len({lease.request_id for lease in leases}) == 50
    assert successor.store.count() == 0
    successor.close()


def test_without_the_tier_nothing_changes(redis_db: redis.Redis) -> None:
    frontier = Frontier(redis_db)
    assert set(frontier.enqueue(requests(["a.com"], 150))) == {"queued"}
    assert queued(redis_db, "a.com") == 150
    assert not [k for k in every_key(redis_db, "*tier*")]
    assert len(frontier.pop("link", 200, OPEN).leases) == 150
    assert not [k for k in every_key(redis_db, "*tier*")]


def test_a_window_emptied_while_its_tail_is_on_disk_keeps_each_crawls_own_order(
    redis_db: redis.Redis, disk: DiskTier
) -> None:
    """The window runs dry before the mover refills it: the crawl's next request must still come after
    its spilled ones (its fair-queuing state outlives the empty window while a tail exists)."""
    frontier = Frontier(redis_db, window=WINDOW)
    assert set(frontier.enqueue([new(f"http://a.com/{i}", "a.com") for i in range(WINDOW + 10)])) == {"queued"}
    first = frontier.pop("link", WINDOW, OPEN).leases
    frontier.ack([Ack.of(lease) for lease in first])
    assert queued(redis_db, "a.com") == 0  # dry, 10 still in the spill stream
    assert frontier.enqueue([new("http://a.com/late", "a.com")]) == ["queued"]
    rest = drain_all(frontier, disk, 11)
    urls = [lease.record["url"] for lease in rest]
    assert urls == [f"http://a.com/{i}" for i in range(WINDOW, WINDOW + 10)] + ["http://a.com/late"]
