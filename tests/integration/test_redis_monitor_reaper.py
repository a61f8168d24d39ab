"""The lease reaper, the dead-letter actions and the "finished" announcement on real services."""

from __future__ import annotations

import pytest

from tests.integration.test_redis_monitor_helpers import (
    add_jobs,
    answered,
    drive,
    frontier_of,
    new_uuid,
    running_monitor,
)
from tests.support.cluster import TestCluster
from tests.support.frontier_keys import first_shard, in_shard, progress_hash, shard_sum
from utils.frontier import Ack, Frontier, NewRequest, ThrottlePolicy, crawl_request, dead_letters, keys, stored_requests

pytestmark = pytest.mark.integration

FAST = {"REAPER_INTERVAL": 0.05, "FINISHED_INTERVAL": 0.05, "RETRY_TIMES": 2, "REDIS_MONITOR_RETRY_DELAY": 0.05}
OPEN = ThrottlePolicy(hits=0)
ATTRS = {"attempt": 9, "tags": [], "deep": {"list": [1, 2.5]}}  # must survive the reaper byte for byte


def queue_one(frontier: Frontier, crawlid: str, url: str = "http://a.com/page") -> None:
    request = {"url": url, "appid": "app", "crawlid": crawlid, "spiderid": "link", "priority": 7,
               "attrs": ATTRS, "deny_extensions": []}  # fmt: skip
    stored = crawl_request.encode(crawl_request.to_record(request))._asdict()
    assert frontier.enqueue([NewRequest("link", "a.com", 7, "app", crawlid, seed=True, **stored)]) == ["queued"]


def stored(frontier: Frontier) -> dict:
    ((member, _),) = frontier.client.zrange(
        in_shard(frontier.client, keys.queue("link", "a.com"), "a.com"), 0, -1, withscores=True
    )
    record = stored_requests.read(frontier.client, "link", "a.com", member)
    assert record is not None
    return record


def progress(frontier: Frontier, crawlid: str) -> dict[str, str]:
    return progress_hash(frontier.client, "link", "app", crawlid)


def finished_in(reader) -> list[dict]:
    reader.poll(0.1)
    return [m for m in reader.messages if m["action"] == "finished"]


@pytest.fixture
def frontier(cluster: TestCluster) -> Frontier:
    return frontier_of(cluster, lease_timeout=0.3)


def test_expired_leases_are_requeued_then_dead_lettered_after_retry_times(
    cluster: TestCluster, frontier: Frontier, topic_reader
) -> None:
    queue_one(frontier, "r1")
    pages, letters, outbound = (
        topic_reader("crawled_firehose"),
        topic_reader("dead_letter"),
        topic_reader("outbound_firehose"),
    )
    r = frontier.client
    with running_monitor(cluster, **FAST) as monitor:
        for attempt in (1, 2):
            (lease,) = frontier.pop("link", 1, OPEN).leases  # the spider takes it, then "dies"
            drive(monitor, lambda: r.zcard(in_shard(r, keys.queue("link", "a.com"), "a.com")) == 1)
            record = stored(frontier)
            assert record["attempt"] == attempt
            assert (record["attrs"], record["deny_extensions"], record["url"]) == (ATTRS, [], "http://a.com/page")
            assert r.zscore(in_shard(r, keys.queue("link", "a.com"), "a.com"), lease.request_id) == -7
            counts = progress(frontier, "r1")
            assert (counts["queued"], counts["inflight"], counts["reaped"]) == ("1", "0", str(attempt))
            assert shard_sum(r, "hlen", keys.crawl_requests("link", "app", "r1", "a.com")) == 1
        (lease,) = frontier.pop("link", 1, OPEN).leases
        drive(monitor, lambda: progress(frontier, "r1").get("dead") == "1")
        (page,) = pages.wait_for(lambda got: len(got) >= 1, timeout=15)
        (letter,) = letters.wait_for(lambda got: len(got) >= 1, timeout=15)
        finished = drive(monitor, lambda: finished_in(outbound))
    assert shard_sum(r, "exists", keys.crawl_domains("link", "app", "r1")) == 0
    assert shard_sum(r, "exists", keys.crawl_requests("link", "app", "r1", "a.com")) == 0
    assert (page["success"], page["url"], page["attempt"], page["attrs"]) == (False, "http://a.com/page", 2, ATTRS)
    assert "lease expired 3 times" in page["exception"]
    assert (page["appid"], page["crawlid"], page["request_id"]) == ("app", "r1", lease.record["request_id"])
    assert (letter["attempts"], letter["url"], letter["crawlid"]) == (3, "http://a.com/page", "r1")
    (kept,) = r.lrange(keys.dead_letters("link", "app", "r1"), 0, -1)
    assert crawl_request.decode(kept)["request_id"] == letter["request_id"]
    (announcement,) = finished
    assert set(announcement) == {"action", "appid", "crawlid", "spiderid", "server_time", "progress"}
    assert (announcement["progress"]["dead"], announcement["progress"]["finished"]) == (1, True)


def test_a_finished_crawl_is_announced_once_and_gone_crawls_leave_the_registry(
    cluster: TestCluster, frontier: Frontier, topic_reader
) -> None:
    queue_one(frontier, "f1", "http://a.com/1")
    queue_one(frontier, "f1", "http://a.com/2")
    r = frontier.client
    r.zadd(keys.CRAWLS, {keys.crawl_member("link", "app", "expired-long-ago"): 1.0})
    outbound = topic_reader("outbound_firehose")
    leases = frontier.pop("link", 2, OPEN).leases
    with running_monitor(cluster, **FAST) as first, running_monitor(cluster, **FAST) as second:
        first.run_once()
        assert frontier.ack([Ack.of(leases[0])]) == ["acked"]
        second.run_once()
        assert frontier.ack([Ack.of(leases[1], "failed")]) == ["acked"]

        def announced() -> list[dict]:
            first.run_once()
            second.run_once()
            return finished_in(outbound)

        (announcement,) = drive(first, announced)
        outbound.poll(1.0)
        first.run_once()
        second.run_once()
    assert [m for m in outbound.messages if m["action"] == "finished"] == [announcement]
    assert (announcement["appid"], announcement["crawlid"], announcement["spiderid"]) == ("app", "f1", "link")
    snap = announcement["progress"]
    assert (snap["crawled"], snap["failed"], snap["enqueued"], snap["pending"]) == (1, 1, 2, 0)
    assert r.zscore(keys.CRAWLS, keys.crawl_member("link", "app", "expired-long-ago")) is None
    assert progress_hash(r, "link", "app", "f1").get("finished") is not None


def test_dead_letters_are_listed_replayed_and_purged(cluster: TestCluster, frontier: Frontier, topic_reader) -> None:
    r = frontier.client
    pipe = r.pipeline(transaction=False)
    for n in range(3):
        record = crawl_request.to_record({"url": f"http://b.com/{n}", "appid": "app", "crawlid": "d1",
                                          "spiderid": "link", "priority": 4})  # fmt: skip
        dead_letters.store(pipe, dead_letters.record({**record, "attempt": 2}, "HTTP 500", 500, 3, "crawler"))
    pipe.hset(
        first_shard(r, keys.crawl_progress("link", "app", "d1")), mapping={"dead": 3, "enqueued": 3, "finished": "1"}
    )
    pipe.execute()
    outbound = topic_reader("outbound_firehose")

    def action(name: str) -> dict:
        request = {"action": name, "appid": "app", "crawlid": "d1", "spiderid": "link", "uuid": new_uuid()}
        add_jobs(r, "action", [request])
        return drive(monitor, answered(outbound, [request["uuid"]]))[request["uuid"]]

    with running_monitor(cluster, **FAST) as monitor:
        listed = action("dead-letters")
        replayed = action("replay-dead-letters")
        requeued = r.hgetall(in_shard(r, keys.crawl_requests("link", "app", "d1", "b.com"), "b.com"))
        dead_letters.store(r, dead_letters.record({"url": "http://b.com/x", "appid": "app", "crawlid": "d1",
                                                   "spiderid": "link"}, "boom", None, 1, "crawler"))  # fmt: skip
        purged = action("purge-dead-letters")
    common = {"action", "appid", "crawlid", "spiderid", "uuid", "server_time"}
    assert set(listed) == common | {"dead_letters", "total_dead_letters"}
    assert [d["url"] for d in listed["dead_letters"]] == ["http://b.com/2", "http://b.com/1", "http://b.com/0"]
    assert (listed["total_dead_letters"], listed["dead_letters"][0]["error"]) == (3, "HTTP 500")
    assert set(replayed) == common | {"total_replayed"}
    assert replayed["total_replayed"] == 3
    records = [crawl_request.decode(p) for p in requeued.values()]
    assert sorted(rec["url"] for rec in records) == ["http://b.com/0", "http://b.com/1", "http://b.com/2"]
    assert all("attempt" not in rec and rec["priority"] == 4 for rec in records)
    counts = progress(frontier, "d1")
    assert (counts["dead"], counts["replayed"], counts["queued"]) == ("0", "3", "3")
    assert "finished" not in counts
    assert set(purged) == common | {"total_purged"}
    assert purged["total_purged"] == 1
    assert r.exists(keys.dead_letters("link", "app", "d1")) == 0
