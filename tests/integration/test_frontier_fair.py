"""Fair queuing inside a priority (lua/lib/fair.lua) on a real Redis and a Redis Cluster: crawls that
share a domain at one priority are served by weight, not by arrival; priority stays strict."""

from __future__ import annotations

from collections import Counter

import pytest
import redis
import ujson

from tests.support.frontier_keys import in_shard
from utils.frontier import Frontier, NewRequest, ThrottlePolicy, crawl_request, keys, progress
from utils.frontier.fingerprint import fingerprint
from utils.frontier.progress import CrawlRef

pytestmark = pytest.mark.integration
OPEN = ThrottlePolicy(hits=0)  # unthrottled: the pops below show the queue's order alone


def new(url: str, crawlid: str, priority: int = 1, appid: str = "app", **fields: object) -> NewRequest:
    record = crawl_request.to_record(
        {"url": url, "appid": appid, "crawlid": crawlid, "spiderid": "link", "priority": priority, **fields}
    )
    return NewRequest("link", "a.com", priority, appid, crawlid, fingerprint=fingerprint(url),
                      **crawl_request.encode(record)._asdict())  # fmt: skip


def batch(crawlid: str, n: int, priority: int = 1, **fields: object) -> list[NewRequest]:
    return [new(f"http://a.com/{crawlid}/{i}", crawlid, priority, **fields) for i in range(n)]


def served(frontier: Frontier, n: int) -> list[tuple[str, str]]:
    """(crawlid, url) of the next `n` leases, one pop each."""
    out = []
    for _ in range(n):
        (lease,) = frontier.pop("link", 1, OPEN).leases
        out.append((lease.record["crawlid"], lease.record["url"]))
    return out


def test_a_crawl_behind_a_backlog_is_interleaved_not_queued_behind_it(redis_db: redis.Redis) -> None:
    frontier = Frontier(redis_db)
    assert set(frontier.enqueue(batch("big", 40))) == {"queued"}
    assert [c for c, _ in served(frontier, 4)] == ["big"] * 4
    assert set(frontier.enqueue(batch("small", 5))) == {"queued"}
    order = served(frontier, 12)
    # the newcomer goes right after the backlog's head, then alternates (arrival order: 36 big first)
    assert [c for c, _ in order[:10]] == ["big", "small"] * 5
    big = [url for c, url in order if c == "big"]
    small = [url for c, url in order if c == "small"]
    assert big == [f"http://a.com/big/{i}" for i in range(4, 4 + len(big))]  # each crawl's own order kept
    assert small == [f"http://a.com/small/{i}" for i in range(5)]


def test_priority_stays_strict_over_fairness(redis_db: redis.Redis) -> None:
    frontier = Frontier(redis_db)
    assert set(frontier.enqueue(batch("low", 10, priority=1) + batch("high", 3, priority=5))) == {"queued"}
    assert set(frontier.enqueue(batch("other", 3, priority=1))) == {"queued"}
    order = [c for c, _ in served(frontier, 16)]
    assert order[:3] == ["high"] * 3
    assert order[3:9] == ["low", "other"] * 3


def test_weights_share_a_domain_in_their_ratio(redis_db: redis.Redis) -> None:
    frontier = Frontier(redis_db)
    requests = batch("w1", 70, weight=1) + batch("w2", 70, weight=2) + batch("w4", 70, weight=4)
    assert set(frontier.enqueue(requests)) == {"queued"}
    counts = Counter(c for c, _ in served(frontier, 70))
    assert {c: round(n / 10) for c, n in counts.items()} == {"w1": 1, "w2": 2, "w4": 4}, counts


def test_weight_comes_from_the_request_else_the_app_else_the_setting(redis_db: redis.Redis) -> None:
    redis_db.hset(keys.APPS_QUOTAS, mapping={"heavy": ujson.dumps({"weight": 3}), "plain": ujson.dumps({})})
    frontier = Frontier(redis_db, weight=0.5)
    requests = [new("http://a.com/own", "own", appid="heavy", weight=2), new("http://a.com/app", "app", appid="heavy"),
                new("http://a.com/set", "set", appid="plain")]  # fmt: skip
    assert frontier.enqueue(requests) == ["queued"] * 3
    weights = {c: progress.read(redis_db, CrawlRef("link", a, c)).weight for a, c in
               (("heavy", "own"), ("heavy", "app"), ("plain", "set"))}  # fmt: skip
    assert weights == {"own": 2.0, "app": 3.0, "set": 0.5}
    view = progress.snapshot(progress.read(redis_db, CrawlRef("link", "heavy", "app")))
    assert view["weight"] == 3.0  # what `info` shows


def test_the_queue_member_leads_with_the_tag_and_state_goes_with_the_queue(redis_db: redis.Redis) -> None:
    frontier = Frontier(redis_db)
    assert frontier.enqueue(batch("c1", 2)) == ["queued"] * 2
    queue = in_shard(redis_db, keys.queue("link", "a.com"), "a.com")
    members = [m.decode() for m in redis_db.zrange(queue, 0, -1)]
    assert all(m.startswith(crawl_request.TAG_MARK) for m in members)
    assert [crawl_request.created_at(m) is not None for m in members] == [True, True]
    fair = in_shard(redis_db, keys.fair("link", "a.com"), "a.com")
    assert redis_db.exists(fair)  # while the queue holds requests
    leases = frontier.pop("link", 5, OPEN).leases
    assert [lease.record["request_id"] for lease in leases] == [crawl_request.id_of(m) for m in members]
    assert not redis_db.exists(fair)  # the queue emptied: every crawl starts level again


def test_untagged_members_of_an_older_shoal_go_first_and_are_served(redis_db: redis.Redis) -> None:
    frontier = Frontier(redis_db)
    assert frontier.enqueue(batch("old", 2)) == ["queued"] * 2
    queue = in_shard(redis_db, keys.queue("link", "a.com"), "a.com")
    sid = in_shard(redis_db, "link", "a.com")
    for tagged, score in redis_db.zrange(queue, 0, -1, withscores=True):  # as an older Shoal queued them
        member = tagged.decode()
        untagged = crawl_request.id_of(member) + crawl_request.code_of(member)
        requests = keys.crawl_requests(sid, "app", "old", "a.com")
        payload = redis_db.hget(requests, crawl_request.field_of(member))
        redis_db.hset(requests, crawl_request.field_of(untagged), payload)
        redis_db.hdel(requests, crawl_request.field_of(member))
        redis_db.zrem(queue, member)
        redis_db.zadd(queue, {untagged: score})
    assert frontier.enqueue(batch("new", 2)) == ["queued"] * 2
    assert [c for c, _ in served(frontier, 4)] == ["old", "old", "new", "new"]
