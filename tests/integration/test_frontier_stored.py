"""Stored requests in Redis: one profile per crawl, compact per-domain hashes, and the older layout moved."""

from __future__ import annotations

import time

import pytest
import redis

from tests.support.frontier_keys import in_shard, shard_sum, stored_count
from utils.frontier import (
    Ack,
    Frontier,
    NewRequest,
    Retry,
    ThrottlePolicy,
    crawl_request,
    keys,
    memory,
    stored_requests,
)
from utils.frontier.fingerprint import fingerprint
from utils.frontier.progress import CrawlRef
from utils.frontier.shards import Shards
from utils.frontier.upgrade import upgrade_stored_requests

pytestmark = pytest.mark.integration
OPEN = ThrottlePolicy(hits=0)
CRAWL = {"appid": "app", "crawlid": "c1", "spiderid": "link", "priority": 5, "maxdepth": 3,
         "allow_regex": [rf"^http://a\.com/s{i}/" for i in range(20)], "cookie": "k=v; s=1",
         "attrs": {"customer": "acme", "deep": {"list": [1, 2.5], "empty": []}}}  # fmt: skip


def child(url: str, domain: str, **fields) -> NewRequest:
    record = crawl_request.to_record({**CRAWL, "url": url, "curdepth": 1, **fields})
    return NewRequest("link", domain, 5, "app", "c1", fingerprint=fingerprint(url),
                      **crawl_request.encode(record)._asdict())  # fmt: skip


def pop_all(frontier: Frontier, n: int) -> list:
    """Pops until `n` leases came back (on a Redis Cluster one pop may leave a shard for the next)."""
    leases: list = []
    for _ in range(20):
        leases += frontier.pop("link", n - len(leases), OPEN).leases
        if len(leases) >= n:
            break
    return leases


def test_a_crawls_fields_are_stored_once_and_every_lease_gets_them_back(redis_db: redis.Redis) -> None:
    frontier = Frontier(redis_db)
    found = [child(f"http://a.com/s1/{i}", "a.com") for i in range(30)] + [child("http://b.com/x", "b.com")]
    assert set(frontier.enqueue(found)) == {"queued"}
    profiles = sum((list(redis_db.hkeys(tag + keys.crawl_profiles("link", "app", "c1"))) for tag in
                    Shards.for_client(redis_db).tags), [])  # fmt: skip
    assert sorted(p for p in profiles if not p.startswith(b"#")) in ([b"1"], [b"1", b"1"])  # one per shard used
    requests = in_shard(redis_db, keys.crawl_requests("link", "app", "c1", "a.com"), "a.com")
    assert redis_db.object("encoding", requests) == b"listpack"
    assert max(len(v) for v in redis_db.hvals(requests)) < 40
    leases = pop_all(frontier, 31)
    assert len(leases) == 31
    for lease in leases:
        assert {k: lease.record[k] for k in ("attrs", "allow_regex", "cookie", "maxdepth", "curdepth")} == {
            **{k: CRAWL[k] for k in ("attrs", "allow_regex", "cookie", "maxdepth")}, "curdepth": 1}
    assert frontier.ack([Ack.of(lease) for lease in leases]) == ["acked"] * 31
    assert stored_count(redis_db, "link", "app", "c1") == 0
    assert shard_sum(redis_db, "exists", keys.crawl_domains("link", "app", "c1")) == 0


def test_a_child_whose_spider_changed_a_crawl_field_gets_a_profile_of_its_own(redis_db: redis.Redis) -> None:
    frontier = Frontier(redis_db)
    assert frontier.enqueue([child("http://a.com/1", "a.com"), child("http://a.com/2", "a.com", maxdepth=9)]) == [
        "queued", "queued"]
    depths = sorted(lease.record["maxdepth"] for lease in pop_all(frontier, 2))
    assert depths == [3, 9]
    tag = Shards.for_client(redis_db).tag("a.com")
    assert redis_db.hget(tag + keys.crawl_profiles("link", "app", "c1"), "#") == b"2"


def test_a_retry_keeps_its_crawls_fields(redis_db: redis.Redis) -> None:
    frontier = Frontier(redis_db, lease_timeout=30)
    assert frontier.enqueue([child("http://a.com/1", "a.com")]) == ["queued"]
    (lease,) = frontier.pop("link", 1, OPEN).leases
    retried = {**lease.record, "attempt": 1, "priority": 4}
    assert frontier.retry([Retry(lease, retried, 0.0)]) == ["delayed"]
    time.sleep(0.05)
    (again,) = frontier.pop("link", 1, OPEN).leases
    assert (again.record["attempt"], again.record["priority"], again.record["attrs"]) == (1, 4, CRAWL["attrs"])


def test_requests_an_older_shoal_stored_are_moved_and_crawled(redis_db: redis.Redis) -> None:
    frontier = Frontier(redis_db)
    assert frontier.enqueue([child("http://a.com/1", "a.com"), child("http://a.com/2", "a.com")]) == ["queued"] * 2
    tag = Shards.for_client(redis_db).tag("a.com")
    sid = tag + "link"
    queue = tag + keys.queue("link", "a.com")
    members = []
    legacy = keys.legacy_crawl_requests(sid, "app", "c1")
    for tagged, score in redis_db.zrange(queue, 0, -1, withscores=True):
        # as an older Shoal left them: untagged members, one crawl-wide hash, the whole request as JSON
        member = crawl_request.id_of(tagged.decode()) + crawl_request.code_of(tagged.decode())
        redis_db.zrem(queue, tagged)
        redis_db.zadd(queue, {member: score})
        members.append(member)
        old = '{"url":"http://a.com/old-' + member[-4:] + '","priority":5,"curdepth":1,"attrs":{"k":[]}}'
        redis_db.hset(legacy, member[:16] + "a.com", old)
    redis_db.delete(keys.crawl_requests(sid, "app", "c1", "a.com"), keys.crawl_domains(sid, "app", "c1"))
    assert upgrade_stored_requests(redis_db) == 2
    assert upgrade_stored_requests(redis_db) == 0
    assert not redis_db.exists(legacy)
    record = stored_requests.read(redis_db, "link", "a.com", members[0])
    assert record is not None and record["attrs"] == {"k": []}  # noqa: PT018
    leases = pop_all(frontier, 2)
    assert sorted(lease.record["url"][:17] for lease in leases) == ["http://a.com/old-"] * 2
    assert frontier.ack([Ack.of(lease) for lease in leases]) == ["acked", "acked"]
    assert stored_count(redis_db, "link", "app", "c1") == 0


def test_redis_memory_and_a_crawls_bytes_are_read_on_either_backend(redis_db: redis.Redis) -> None:
    frontier = Frontier(redis_db)
    assert set(frontier.enqueue([child(f"http://a{i % 7}.com/p{i}", f"a{i % 7}.com") for i in range(70)])) == {
        "queued"}
    found = memory.redis_memory(redis_db)
    assert found.used > 0 and found.policy == "noeviction"  # noqa: PT018  (every Redis Shoal starts)
    size = memory.crawl_bytes(redis_db, CrawlRef("link", "app", "c1"))
    assert 70 * 60 < size < 70 * 400  # its stored requests, index, profile and dupefilter
    assert "B per stored request (70)" in memory.describe(found, 70)
