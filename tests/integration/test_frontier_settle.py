"""The frontier's settling scripts on a real Redis: retries through `delayed`, releases, lease
extension, expiry and refusal drops, page-limit slots, throttle hold-backs and the dupefilters."""

from __future__ import annotations

import time

import pytest
import redis

from tests.integration.test_frontier import OPEN, new, progress
from tests.support.frontier_keys import in_shard
from tests.support.services import wait_until
from utils.frontier import Ack, Frontier, NewRequest, Retry, Settlement, ThrottlePolicy, crawl_request, keys
from utils.frontier.fingerprint import bloom_size, fingerprint
from utils.frontier.shards import Shards

pytestmark = pytest.mark.integration


@pytest.fixture
def frontier(redis_db: redis.Redis) -> Frontier:
    return Frontier(redis_db, lease_timeout=30)


def test_a_retry_waits_in_delayed_then_returns_with_lower_priority_and_one_more_attempt(
    frontier: Frontier, redis_db: redis.Redis
) -> None:
    frontier.enqueue([new("http://a.com/x", "a.com", priority=50)])
    (lease,) = frontier.pop("link", 1, OPEN).leases
    record = {**lease.record, "attempt": 1, "priority": 40}
    assert frontier.retry([Retry(lease, record, delay=0.6)]) == ["delayed"]
    assert frontier.retry([Retry(lease, record, delay=0.6)]) == ["unknown"]  # no longer held
    counts = progress(redis_db)
    assert (counts["queued"], counts["inflight"], counts["retrying"]) == (0, 0, 1)
    assert redis_db.zcard(in_shard(redis_db, keys.delayed("link"), "a.com")) == 1

    early = frontier.pop("link", 1, OPEN)
    assert early.leases == []
    assert early.retry_after is not None and 0.3 < early.retry_after <= 0.6  # noqa: PT018
    (again,) = wait_until(lambda: frontier.pop("link", 1, OPEN).leases, timeout=5)
    assert again.request_id == lease.request_id
    assert (again.record["attempt"], again.record["priority"]) == (1, 40)
    counts = progress(redis_db)
    assert (counts["queued"], counts["inflight"], counts["retrying"]) == (0, 1, 0)


def test_release_puts_leases_back_first_in_line_without_counting_an_attempt(
    frontier: Frontier, redis_db: redis.Redis
) -> None:
    frontier.enqueue([new(f"http://a.com/{i}", "a.com") for i in range(3)])
    leases = frontier.pop("link", 2, OPEN).leases
    assert frontier.release(leases) == ["released", "released"]
    assert frontier.release(leases[:1]) == ["unknown"]
    assert redis_db.zcard(in_shard(redis_db, keys.inflight("link"), "a.com")) == 0
    again = frontier.pop("link", 3, OPEN).leases
    assert [lease.record["url"] for lease in again] == [f"http://a.com/{i}" for i in range(3)]
    assert all(lease.record.get("attempt", 0) == 0 for lease in again)
    assert progress(redis_db)["inflight"] == 3


def test_extend_pushes_held_deadlines_and_reports_reaped_leases(frontier: Frontier, redis_db: redis.Redis) -> None:
    frontier.enqueue([new(f"http://a.com/{i}", "a.com") for i in range(2)])
    short = Frontier(redis_db, lease_timeout=1)
    first, second = short.pop("link", 2, OPEN).leases
    redis_db.zrem(in_shard(redis_db, keys.inflight("link"), "a.com"), second.member)  # as the reaper would
    assert frontier.extend("link", [first, second]) == [second.member]
    assert redis_db.zscore(in_shard(redis_db, keys.inflight("link"), "a.com"), first.member) > time.time() + 25
    assert redis_db.zscore(in_shard(redis_db, keys.inflight("link"), "a.com"), second.member) is None


def test_expired_and_refused_children_are_dropped_and_counted(frontier: Frontier, redis_db: redis.Redis) -> None:
    past, future = int(time.time()) - 5, int(time.time()) + 600
    statuses = frontier.enqueue(
        [new("http://a.com/old", "a.com", expires=past), new("http://a.com/new", "a.com", expires=future),
         new("http://b.com/", "b.com", drop="blacklist"), new("http://a.com/seed", "a.com", seed=True, expires=past)]
    )  # fmt: skip
    assert statuses == ["expired", "queued", "blacklist", "queued"]  # seeds are queued as Scrapy Cluster's
    counts = progress(redis_db)
    assert (counts["dropped_expired"], counts["dropped_blacklist"], counts["queued"]) == (1, 1, 2)


def test_expiry_is_read_from_a_seed_payload_when_not_given(frontier: Frontier) -> None:
    record = crawl_request.to_record({"url": "http://a.com/p", "appid": "app", "crawlid": "c1", "spiderid": "link",
                                      "priority": 1, "expires": int(time.time()) - 1})  # fmt: skip
    child = NewRequest("link", "a.com", 1, "app", "c1", fingerprint=fingerprint("http://a.com/p"),
                       **crawl_request.encode(record)._asdict())
    assert frontier.enqueue([child]) == ["expired"]


def test_a_request_that_ends_without_a_page_gives_its_page_slot_back(frontier: Frontier, redis_db: redis.Redis) -> None:
    assert frontier.enqueue([new(f"http://a.com/{i}", "a.com", max_pages=2) for i in range(3)]) == [
        "queued", "queued", "page_limit",
    ]  # fmt: skip
    first, second = frontier.pop("link", 2, OPEN).leases
    frontier.ack([Ack.of(first, "crawled"), Ack.of(second, "dropped_robots")])
    assert frontier.enqueue([new("http://a.com/9", "a.com", max_pages=2)]) == ["queued"]
    assert frontier.enqueue([new("http://a.com/10", "a.com", max_pages=2)]) == ["page_limit"]


def test_settle_writes_links_retries_dead_letters_and_acks_in_one_round_trip(
    frontier: Frontier, redis_db: redis.Redis
) -> None:
    frontier.enqueue([new(f"http://a.com/{i}", "a.com") for i in range(3)])
    done, retried, dead = frontier.pop("link", 3, OPEN).leases
    letter = {"spiderid": "link", "appid": "app", "crawlid": "c1", "url": dead.record["url"], "error": "boom"}
    before = frontier.round_trips
    out = frontier.settle(
        Settlement(
            requests=[new("http://a.com/child", "a.com")],
            retries=[Retry(retried, {**retried.record, "attempt": 1}, delay=30)],
            dead=[letter],
            acks=[Ack.of(done), Ack.of(dead, "dead")],
        )
    )
    assert out == {"requests": ["queued"], "retries": ["delayed"], "acks": ["acked", "acked"]}
    assert frontier.round_trips - before == 1
    assert redis_db.llen(keys.dead_letters("link", "app", "c1")) == 1
    counts = progress(redis_db)
    assert (counts["crawled"], counts["dead"], counts["retrying"], counts["queued"]) == (1, 1, 1, 1)
    redis_db.script_flush()  # as after a Redis restart: loaded again, the dead letter written once
    late = frontier.pop("link", 1, OPEN).leases
    frontier.settle(Settlement(dead=[letter], acks=[Ack.of(late[0])]))
    assert redis_db.llen(keys.dead_letters("link", "app", "c1")) == 2
    assert progress(redis_db)["crawled"] == 2


def test_a_retry_after_holds_the_domain_back_and_a_crawl_delay_spaces_its_hits(
    frontier: Frontier, redis_db: redis.Redis
) -> None:
    frontier.enqueue([new(f"http://a.com/{i}", "a.com") for i in range(4)])
    policy = ThrottlePolicy(key_prefix="link:", hits=0)  # unthrottled but for the hold-backs
    (lease,) = frontier.pop("link", 1, policy).leases
    frontier.retry([Retry(lease, lease.record, delay=1.0, pause_key=policy.key("a.com"), pause=1.0)])
    held = frontier.pop("link", 4, policy)
    assert held.leases == []
    assert held.retry_after is not None and held.retry_after > 0.5  # noqa: PT018
    wait_until(lambda: frontier.pop("link", 1, policy).leases, timeout=5)
    frontier.set_throttle_delay("a.com", policy.key("a.com"), 0.5, ttl=60)
    popped_at = []
    deadline = time.monotonic() + 5
    while len(popped_at) < 3 and time.monotonic() < deadline:
        if frontier.pop("link", 4, policy).leases:
            popped_at.append(time.monotonic())
        time.sleep(0.01)
    assert len(popped_at) == 3
    gaps = [b - a for a, b in zip(popped_at, popped_at[1:], strict=False)]
    assert all(gap >= 0.45 for gap in gaps), gaps


def test_exact_dupefilter_costs_under_70_bytes_per_url(frontier: Frontier, redis_db: redis.Redis) -> None:
    n = 20_000
    pipe = redis_db.pipeline(transaction=False)
    for i in range(n):
        pipe.sadd(keys.dupefilter("link", "mem"), fingerprint(f"http://a.com/{i}"))
    pipe.execute()
    assert redis_db.memory_usage(keys.dupefilter("link", "mem"), samples=0) / n <= 70


def test_bloom_dupefilter_is_under_2_bytes_per_url_at_its_false_positive_rate(redis_db: redis.Redis) -> None:
    n = 30_000  # 1.8 bytes of bitmap per URL; jemalloc rounds the allocation up by a few %
    frontier = Frontier(redis_db, dupefilter_mode="bloom", bloom=bloom_size(n, 0.001))
    batch = [new(f"http://a.com/{i}", "a.com", crawlid="bl") for i in range(n)]
    inserted = []
    for start in range(0, n, 3000):
        inserted += frontier.enqueue(batch[start : start + 3000])
    assert inserted.count("duplicate") <= n * 0.001  # false positives while it fills up
    assert frontier.enqueue(batch[:50]) == ["duplicate"] * 50
    bloom_key = in_shard(redis_db, keys.bloom_dupefilter("link", "bl"), "a.com")
    assert redis_db.memory_usage(bloom_key, samples=0) / n <= 2.0
    assert not redis_db.exists(in_shard(redis_db, keys.dupefilter("link", "bl"), "a.com"))
    # Probing adds what it probes, so only a few: the filter stays near its capacity. (Check-only,
    # 100,000 probes of this hashing measure 0.109 %.)
    fresh = [new(f"http://b.com/{i}", "b.com", crawlid="bl") for i in range(3000)]
    statuses = frontier.enqueue(fresh[:1500]) + frontier.enqueue(fresh[1500:])
    false_positives = statuses.count("duplicate") / len(fresh)
    assert false_positives < 0.003, false_positives


def test_a_crawl_picks_bloom_mode_in_its_request(frontier: Frontier, redis_db: redis.Redis) -> None:
    record = crawl_request.to_record({"url": "http://a.com/", "appid": "app", "crawlid": "pick", "spiderid": "link",
                                      "priority": 1, "dupefilter": "bloom"})  # fmt: skip
    seed = NewRequest("link", "a.com", 1, "app", "pick", fingerprint=fingerprint("http://a.com/"), seed=True,
                      **crawl_request.encode(record)._asdict())  # fmt: skip
    assert frontier.enqueue([seed]) == ["queued"]
    assert redis_db.exists(in_shard(redis_db, keys.bloom_dupefilter("link", "pick"), "a.com"))
    assert not redis_db.exists(in_shard(redis_db, keys.dupefilter("link", "pick"), "a.com"))


def test_duplicates_dropped_by_a_spider_are_counted_in_the_same_flush(
    frontier: Frontier, redis_db: redis.Redis
) -> None:
    frontier.enqueue([new("http://a.com/", "a.com")])
    frontier.settle(Settlement(duplicates={("link", "app", "c1"): 5}))
    assert progress(redis_db)["dropped_duplicate"] == 5
    assert redis_db.ttl(Shards.for_client(redis_db).tags[0] + keys.crawl_progress("link", "app", "c1")) > 0
