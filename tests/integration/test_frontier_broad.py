"""The frontier at broad-crawl scale (issue 16), on a real Redis and a real Redis Cluster: every domain
is reached whatever their number, each is served within two of its intervals, a domain that becomes
due is not starved by domains that stay due, live overrides apply at once, and domains an older Shoal
queued (in neither set) are adopted."""

from __future__ import annotations

import struct
import time
from collections import defaultdict

import pytest
import redis

from tests.integration.test_frontier import new
from tests.support.frontier_keys import every_key, in_shard
from utils.frontier import Frontier, ThrottlePolicy, keys, throttle_state
from utils.frontier.shards import Shards

pytestmark = pytest.mark.integration


@pytest.fixture
def frontier(redis_db: redis.Redis) -> Frontier:
    return Frontier(redis_db, lease_timeout=300)


def fill(frontier: Frontier, domains: int, per_domain: int, priority: int = 1) -> None:
    batch = [new(f"http://d{d}.test/{i}", f"d{d}.test", priority) for i in range(per_domain) for d in range(domains)]
    for start in range(0, len(batch), 2000):
        assert set(frontier.enqueue(batch[start : start + 2000])) == {"queued"}


def test_every_domain_is_reached_with_a_small_scan_budget(frontier: Frontier) -> None:
    fill(frontier, domains=3000, per_domain=2)  # six times the old scan limit of 500 domain heads
    policy = ThrottlePolicy(hits=1, window=600, moderated=False)
    served: list[str] = []
    for _ in range(200):
        popped = frontier.pop("link", 100, policy, scan_limit=50)
        served += [lease.domain for lease in popped.leases]
        if not popped.leases and popped.retry_after and popped.retry_after > 500:
            break
    assert len(served) == 3000  # one hit per domain per 600 s: the first request of each
    assert len(set(served)) == 3000


def test_every_domain_is_served_within_two_of_its_intervals(frontier: Frontier) -> None:
    fill(frontier, domains=300, per_domain=8)
    policy = ThrottlePolicy(hits=10, window=10, moderated=True)  # one hit per domain every 1 s
    leased_at: dict[str, list[float]] = defaultdict(list)
    started = time.monotonic()
    while time.monotonic() - started < 5.0:
        for lease in frontier.pop("link", 64, policy).leases:
            leased_at[lease.domain].append(time.monotonic())
        time.sleep(0.01)
    assert len(leased_at) == 300
    gaps = [b - a for times in leased_at.values() for a, b in zip(times, times[1:], strict=False)]
    assert min(gaps) >= 0.9  # the moderated spacing, at the moment of the lease
    assert max(gaps) <= 2.0  # no domain waits more than two intervals for its turn
    assert all(len(times) >= 4 for times in leased_at.values())


def test_a_domain_that_becomes_due_is_not_starved_by_one_that_stays_due(frontier: Frontier) -> None:
    frontier.enqueue([new(f"http://busy.test/{i}", "busy.test") for i in range(2000)])  # older requests
    frontier.enqueue([new(f"http://late.test/{i}", "late.test") for i in range(20)])
    policy = ThrottlePolicy(hits=1, window=0.5, overrides={"busy.test": (0, 1)}, moderated=False)
    order = [lease.domain for _ in range(4) for lease in frontier.pop("link", 1, policy).leases]
    assert order.count("late.test") == 1  # at once, although busy.test's requests are all older
    time.sleep(0.6)  # late.test is due again
    order = [lease.domain for _ in range(4) for lease in frontier.pop("link", 1, policy).leases]
    assert order.count("late.test") == 1


def test_a_changed_override_applies_before_the_old_due_time(frontier: Frontier) -> None:
    frontier.enqueue([new(f"http://slow.test/{i}", "slow.test") for i in range(5)])
    slow = ThrottlePolicy(hits=1, window=600, moderated=False)
    assert len(frontier.pop("link", 5, slow).leases) == 1
    assert frontier.pop("link", 5, slow).leases == []  # snoozed for 600 s
    fast = ThrottlePolicy(hits=1, window=600, moderated=False, overrides={"slow.test": (20, 1)})
    assert len(frontier.pop("link", 5, fast).leases) >= 1


def test_domains_in_neither_set_are_adopted(frontier: Frontier, redis_db: redis.Redis) -> None:
    fill(frontier, domains=40, per_domain=1)
    for pattern in ("*link:line*", "*link:classes_*", "*link:policy"):
        for key in every_key(redis_db, pattern):
            redis_db.delete(key)  # as an older Shoal left its queues: heads and queues only
    served: set[str] = set()
    for _ in range(20):
        served |= {lease.domain for lease in frontier.pop("link", 10, ThrottlePolicy(hits=0), scan_limit=8).leases}
    assert len(served) == 40


def test_classes_missing_from_both_listings_are_found_again(frontier: Frontier, redis_db: redis.Redis) -> None:
    fill(frontier, domains=30, per_domain=2)
    frontier.enqueue([new("http://top.test/1", "top.test", 50)])
    open_ = ThrottlePolicy(hits=0)
    assert [lease.domain for lease in frontier.pop("link", 1, open_).leases] == ["top.test"]
    frontier.enqueue([new("http://top.test/2", "top.test", 50)])
    for key in every_key(redis_db, "*link:classes_*"):
        redis_db.delete(key)  # as a failed call could leave them: the line is whole, its classes unlisted
    deadline = time.monotonic() + 10
    got: list[str] = []
    while "top.test" not in got and time.monotonic() < deadline:
        got = [lease.domain for lease in frontier.pop("link", 1, open_).leases]
        time.sleep(0.05)
    assert got == ["top.test"]  # its class is listed again by the walk (one class a second)


def test_throttle_states_past_their_time_are_swept(frontier: Frontier, redis_db: redis.Redis) -> None:
    frontier.enqueue([new("http://kept.test/1", "kept.test"), new("http://kept.test/2", "kept.test")])
    policy = ThrottlePolicy(key_prefix="link:", hits=5, window=60, moderated=False)  # stays due: pops reach its shard
    assert [lease.domain for lease in frontier.pop("link", 1, policy).leases] == ["kept.test"]
    states = in_shard(redis_db, keys.throttle_states("link:kept.test", "kept.test"), "kept.test")
    old = time.time() - 300
    stale = struct.pack(">5d", old, old, 0, 0, 0) + struct.pack(">d", old - 60)  # an idle domain's last hit
    redis_db.hset(states, "gone.test", stale)
    redis_db.hdel(in_shard(redis_db, keys.policy("link"), "kept.test"), "class_walk_at")  # the next step is due
    assert [lease.domain for lease in frontier.pop("link", 1, policy).leases] == ["kept.test"]
    assert redis_db.hget(states, "gone.test") is None
    kept = throttle_state.read(redis_db, "link:kept.test", "kept.test", Shards.for_client(redis_db).tag("kept.test"))
    assert kept is not None
    assert len(kept.hits) == 2
    assert kept.exp > time.time()


def test_a_domain_whose_next_request_outranks_the_ones_taken_with_it_goes_first(frontier: Frontier) -> None:
    frontier.enqueue([new("http://a.test/10", "a.test", 10), new("http://a.test/8", "a.test", 8)])
    frontier.enqueue([new("http://b.test/5", "b.test", 5), new("http://c.test/5", "c.test", 5)])
    open_ = ThrottlePolicy(hits=0)
    got = [lease.record["url"] for lease in frontier.pop("link", 3, open_).leases]
    assert got[:3] == ["http://a.test/10", "http://a.test/8", "http://b.test/5"]
    rest = got[3:] + [lease.record["url"] for lease in frontier.pop("link", 3, open_).leases]
    assert rest == ["http://c.test/5"]  # (a Redis Cluster's shards tied for the best may share a batch)


def test_hits_in_the_window_are_counted_across_changes_of_the_domains_limit(frontier: Frontier) -> None:
    frontier.enqueue([new(f"http://a.test/{i}", "a.test") for i in range(10)])

    def leased(hits: int) -> int:
        policy = ThrottlePolicy(hits=1, window=60, moderated=False, overrides={"a.test": (hits, 60)})
        return sum(len(frontier.pop("link", 10, policy).leases) for _ in range(4))

    assert leased(3) == 3
    assert leased(2) == 0  # three hits in the window already
    assert leased(5) == 2  # the three count towards five


def test_a_throttle_hash_expiry_is_never_pulled_back(frontier: Frontier, redis_db: redis.Redis) -> None:
    """A writer whose read of the hash's expiry is older than another writer's push (its field ''
    says earlier than the key's TTL) extends the hash, never shortens it."""
    frontier.enqueue([new("http://late.test/1", "late.test")])
    states = in_shard(redis_db, keys.throttle_states("s:late.test", "late.test"), "late.test")
    redis_db.hset(states, "", struct.pack(">d", time.time() + 10))  # a stale record of the expiry
    redis_db.expire(states, 10_000)  # pushed further by another writer
    policy = ThrottlePolicy(key_prefix="s:", hits=5, window=60, moderated=False)  # a shared prefix: the hash
    assert [lease.domain for lease in frontier.pop("link", 1, policy).leases] == ["late.test"]
    assert redis_db.hget(states, "late.test") is not None
    assert redis_db.ttl(states) > 9_000
