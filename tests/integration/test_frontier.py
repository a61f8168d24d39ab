"""The frontier's Lua scripts on a real Redis: filters, global priority, FIFO, throttle, leases, acks."""

from __future__ import annotations

import struct
import time
from dataclasses import astuple

import pytest
import redis

from tests.support.frontier_keys import crawl_counters, in_shard
from utils.frontier import (
    Ack,
    Frontier,
    NewRequest,
    ThrottlePolicy,
    crawl_request,
    keys,
    stored_requests,
    throttle_state,
)
from utils.frontier.fingerprint import fingerprint

pytestmark = pytest.mark.integration
OPEN = ThrottlePolicy(hits=0)  # unthrottled


def new(url: str, domain: str, priority: int = 1, crawlid: str = "c1", seed: bool = False, **kw) -> NewRequest:
    record = crawl_request.to_record(
        {"url": url, "appid": "app", "crawlid": crawlid, "spiderid": "link", "priority": priority}
    )
    return NewRequest("link", domain, priority, "app", crawlid, fingerprint=fingerprint(url), seed=seed,
                      **crawl_request.encode(record)._asdict(), **kw)  # fmt: skip


@pytest.fixture
def frontier(redis_db: redis.Redis) -> Frontier:
    return Frontier(redis_db, lease_timeout=30)


def progress(client: redis.Redis, crawlid: str = "c1") -> dict[str, int]:
    return crawl_counters(client, "link", "app", crawlid)


def urls(frontier: Frontier, n: int = 50, policy: ThrottlePolicy = OPEN) -> list[str]:
    return [lease.record["url"] for lease in frontier.pop("link", n, policy).leases]


def test_queue_keys_keep_scrapy_cluster_names_and_scores(frontier: Frontier, redis_db: redis.Redis) -> None:
    assert frontier.enqueue([new("http://a.com/1", "a.com", priority=90)]) == ["queued"]
    queue = in_shard(redis_db, keys.queue("link", "a.com"), "a.com")
    ((member, score),) = redis_db.zrange(queue, 0, -1, withscores=True)
    assert score == -90
    stored = stored_requests.read(redis_db, "link", "a.com", member)
    assert stored["url"] == "http://a.com/1"
    assert redis_db.zscore(in_shard(redis_db, keys.heads("link"), "a.com"), "a.com") == -90
    assert redis_db.sismember(keys.SPIDERS, "link")


def test_priority_is_global_across_domains_and_fifo_within_a_priority(frontier: Frontier) -> None:
    frontier.enqueue([new("http://a.com/low", "a.com", 5)])
    frontier.enqueue([new("http://b.com/first", "b.com", 50)])
    frontier.enqueue([new("http://a.com/second", "a.com", 50)])
    frontier.enqueue([new("http://c.com/third", "c.com", 50), new("http://b.com/fourth", "b.com", 50)])
    assert urls(frontier) == [
        "http://b.com/first", "http://a.com/second", "http://c.com/third", "http://b.com/fourth", "http://a.com/low",
    ]  # fmt: skip


def test_duplicates_page_limits_and_stopped_crawls_are_dropped_and_counted(
    frontier: Frontier, redis_db: redis.Redis
) -> None:
    assert frontier.enqueue([new("http://a.com/", "a.com", seed=True)]) == ["queued"]
    statuses = frontier.enqueue(
        [new("http://a.com/", "a.com"), new("http://a.com/1", "a.com", max_pages=2),
         new("http://a.com/2", "a.com", max_pages=2), new("http://a.com/3", "a.com", max_pages=2)]
    )  # fmt: skip
    assert statuses == ["duplicate", "queued", "queued", "page_limit"]
    redis_db.zadd(in_shard(redis_db, keys.stopped("link"), "a.com"), {"app||c1": time.time() + 60})
    assert frontier.enqueue([new("http://a.com/4", "a.com")]) == ["blacklist"]
    assert frontier.enqueue([new("http://a.com/5", "a.com", seed=True)]) == ["queued"]  # seeds always queue
    counts = progress(redis_db)
    assert counts["queued"] == counts["enqueued"] == 4
    assert (counts["dropped_duplicate"], counts["dropped_page_limit"], counts["dropped_blacklist"]) == (
        1,
        1,
        1,
    )
    assert redis_db.ttl(in_shard(redis_db, keys.dupefilter("link", "c1"), "a.com")) > 0


def test_a_replayed_kafka_offset_is_not_queued_twice(frontier: Frontier) -> None:
    marks = keys.ingest_marks("t", 0)
    first = new("http://a.com/x", "a.com", seed=True, offset_key=marks, offset=7, mark="aa")
    assert frontier.enqueue([first]) == ["queued"]
    assert frontier.enqueue([first, new("http://a.com/y", "a.com", seed=True, offset_key=marks,
                                        offset=8, mark="bb")]) == ["replayed", "queued"]  # fmt: skip


def test_another_message_at_a_written_offset_is_queued(frontier: Frontier, redis_db: redis.Redis) -> None:
    """A reset log (broker started afresh, topic recreated, another cluster) reuses offsets: only
    the very message written there is a replay; anything else at that offset is new work."""
    marks = keys.ingest_marks("t", 0)
    assert frontier.enqueue([new("http://a.com/x", "a.com", seed=True, offset_key=marks, offset=7, mark="aa")]) == [
        "queued"
    ]
    reset = [new("http://a.com/z", "a.com", seed=True, offset_key=marks, offset=o, mark="cc") for o in (0, 7)]
    assert frontier.enqueue(reset) == ["queued", "queued"]
    assert frontier.enqueue(reset) == ["replayed", "replayed"]  # and those are replays in their turn
    assert progress(redis_db)["enqueued"] == 3
    stored = redis_db.zrange(in_shard(redis_db, marks, "a.com"), 0, -1, withscores=True)
    assert sorted(stored) == [(b"0:cc", 0.0), (b"7:aa", 7.0), (b"7:cc", 7.0)]
    assert redis_db.ttl(in_shard(redis_db, marks, "a.com")) > 0


def test_offset_marks_are_trimmed_far_below_the_newest(frontier: Frontier, redis_db: redis.Redis) -> None:
    marks = keys.ingest_marks("t", 1)
    old = new("http://a.com/old", "a.com", seed=True, offset_key=marks, offset=5, mark="aa")
    frontier.enqueue([old, new("http://a.com/new", "a.com", seed=True, offset_key=marks, offset=30_000, mark="bb")])
    assert redis_db.zrange(in_shard(redis_db, marks, "a.com"), 0, -1) == [b"30000:bb"]
    assert frontier.enqueue([old]) == ["queued"]  # a replay beyond the window: queued again, never lost


def test_pop_leases_and_ack_settles_exactly_once(frontier: Frontier, redis_db: redis.Redis) -> None:
    frontier.enqueue([new(f"http://a.com/{i}", "a.com") for i in range(3)])
    leases = frontier.pop("link", 2, OPEN).leases
    assert len(leases) == 2
    deadlines = redis_db.zrange(in_shard(redis_db, keys.inflight("link"), "a.com"), 0, -1, withscores=True)
    assert len(deadlines) == 2
    assert all(d > time.time() + 20 for _, d in deadlines)
    assert progress(redis_db)["inflight"] == 2
    assert frontier.ack([Ack.of(leases[0]), Ack.of(leases[1], "failed")]) == ["acked", "acked"]
    assert frontier.ack([Ack.of(leases[0])]) == ["unknown"]
    counts = progress(redis_db)
    assert (counts["queued"], counts["inflight"], counts["crawled"], counts["failed"]) == (1, 0, 1, 1)
    assert redis_db.hlen(in_shard(redis_db, keys.crawl_requests("link", "app", "c1", "a.com"), "a.com")) == 1


def test_a_throttled_domain_yields_to_a_lower_priority_one_and_spends_hits_only_on_pops(
    frontier: Frontier, redis_db: redis.Redis
) -> None:
    frontier.enqueue([new(f"http://a.com/{i}", "a.com", 90) for i in range(5)])
    frontier.enqueue([new(f"http://b.com/{i}", "b.com", 1) for i in range(5)])
    policy = ThrottlePolicy(key_prefix="link:", hits=2, window=60, moderated=False)
    first = frontier.pop("link", 10, policy)
    got = [lease.record["url"] for lease in first.leases]
    assert got == ["http://a.com/0", "http://a.com/1", "http://b.com/0", "http://b.com/1"]
    assert first.denied == 2  # both domains have work left that their throttle now holds back (a metric)
    state = throttle_state.read(redis_db, "link:a.com", "a.com", in_shard(redis_db, "", "a.com"))
    assert state is not None
    assert len(state.hits) == 2  # the two hits in the window
    assert 60 < state.exp - time.time() <= 121  # kept a window past the last hit's window, then swept
    member = redis_db.hget(in_shard(redis_db, keys.line_of("link"), "a.com"), "a.com")
    assert member is not None
    assert int(member[:13], 16) / 1e6 > time.time() + 50
    carried = throttle_state.HEAD.pack(*astuple(state)[:5]) + b"".join(struct.pack(">d", h) for h in state.hits)
    assert member.endswith(carried)  # the state rides in the domain's line_of value
    popped = frontier.pop("link", 10, policy)
    assert popped.leases == []
    assert popped.denied == 0  # snoozed domains are not looked at again before they are due
    assert popped.retry_after is not None
    assert 55 < popped.retry_after <= 60
    redis_db.hdel(in_shard(redis_db, keys.throttle_states("c.com", "c.com"), "c.com"), "c.com")
    assert (
        frontier.pop("link", 1, ThrottlePolicy(hits=2, window=60, blacklist=frozenset({"a.com", "b.com"}))).leases == []
    )


def test_a_domain_leaving_the_line_keeps_its_throttle_state_until_it_is_back(
    frontier: Frontier, redis_db: redis.Redis
) -> None:
    """Under the spider's own prefix a domain in the line carries its state in line_of; when its
    queue empties the state moves to the prefix's hash, which outlives it, and holds when the domain
    is queued again."""
    policy = ThrottlePolicy(key_prefix="link:", hits=2, window=60, moderated=False)
    frontier.enqueue([new(f"http://a.com/{i}", "a.com") for i in range(2)])
    assert len(frontier.pop("link", 10, policy).leases) == 2  # the queue is empty: out of the line
    tag = in_shard(redis_db, "", "a.com")
    assert redis_db.hget(tag + keys.line_of("link"), "a.com") is None
    states = tag + keys.throttle_states("link:a.com", "a.com")
    parked = throttle_state.ThrottleState.decode(redis_db.hget(states, "a.com"))
    assert len(parked.hits) == 2
    assert redis_db.pttl(states) / 1000 > parked.exp - time.time()  # the hash outlives its states
    frontier.enqueue([new("http://a.com/again", "a.com")])
    held = frontier.pop("link", 10, policy)
    assert held.leases == []  # both hits of the window are spent
    assert held.retry_after is not None
    assert 55 < held.retry_after <= 60
    frontier.set_throttle_delay("a.com", "link:a.com", 3.0, 600)  # a write while it is back in line
    state = throttle_state.read(redis_db, "link:a.com", "a.com", tag)
    assert state is not None
    assert state.delay == 3.0
    assert state.hits == parked.hits


def test_a_carried_throttle_state_is_kept_when_an_unthrottled_pop_empties_the_queue(
    frontier: Frontier, redis_db: redis.Redis
) -> None:
    frontier.enqueue([new(f"http://a.com/{i}", "a.com") for i in range(2)])
    throttled = ThrottlePolicy(key_prefix="link:", hits=5, window=60, moderated=False)  # stays due
    assert len(frontier.pop("link", 1, throttled).leases) == 1
    assert len(frontier.pop("link", 1, ThrottlePolicy(key_prefix="link:", hits=0)).leases) == 1  # queue empty
    tag = in_shard(redis_db, "", "a.com")
    assert redis_db.hget(tag + keys.line_of("link"), "a.com") is None
    parked = redis_db.hget(tag + keys.throttle_states("link:a.com", "a.com"), "a.com")
    assert parked is not None
    assert len(throttle_state.ThrottleState.decode(parked).hits) == 1  # the throttled pop's hit


def test_moderated_throttle_spreads_hits_without_drift(frontier: Frontier) -> None:
    frontier.enqueue([new(f"http://a.com/{i}", "a.com") for i in range(100)])
    policy = ThrottlePolicy(key_prefix="m:", hits=20, window=10, moderated=True)  # one every 0.5 s
    got, started = 0, time.monotonic()
    while time.monotonic() - started < 5.0:
        got += len(frontier.pop("link", 8, policy).leases)
        time.sleep(0.013)  # polls that never line up with the 0.5 s slots (a slot may lag 5 %)
    assert 10 <= got <= 11
