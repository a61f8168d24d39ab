"""The redis monitor's actions on real Redis and the broker: info, stop, expire, retries, takeover."""

from __future__ import annotations

import time

import pytest

from tests.integration.test_redis_monitor_helpers import (
    add_jobs,
    answered,
    drive,
    frontier_of,
    new_uuid,
    running_monitor,
    seed,
)
from tests.support.cluster import TestCluster
from tests.support.frontier_keys import in_shard, progress_hash, shard_sum, stored_count
from utils.config.clients import redis_client
from utils.frontier import Ack, Frontier, NewRequest, ThrottlePolicy, crawl_request, keys, stored_requests

pytestmark = pytest.mark.integration

FAST = {"REDIS_MONITOR_RETRY_DELAY": 0.05, "REDIS_MONITOR_CLAIM_IDLE": 0.5, "EXPIRE_INTERVAL": 0.05}
OPEN = ThrottlePolicy(hits=0)
CRAWL_A = [
    ("http://a.com/1", "a.com", 90),
    ("http://a.com/2", "a.com", 50),
    ("http://www.b.org/1", "b.org", 20),
    ("http://b.org/2", "b.org", 20),
    ("http://b.org/3", "b.org", 10),
]
CRAWL_B = [("http://a.com/x", "a.com", 5), ("http://c.net/y", "c.net", 5), ("http://c.net/z", "c.net", 5)]


def info(crawlid: str | None = None, uuid: str | None = None) -> dict:
    request = {"action": "info", "appid": "testapp", "spiderid": "link", "uuid": uuid or new_uuid()}
    return {**request, "crawlid": crawlid} if crawlid else request


def delay_lowest(r, domain: str, priority: int) -> None:
    """Move a domain's last request to the delayed set with a new priority (retry.lua's layout)."""
    ((member, _),) = r.zrange(in_shard(r, keys.queue("link", domain), domain), -1, -1, withscores=True)
    record = stored_requests.read(r, "link", domain, member)
    r.zrem(in_shard(r, keys.queue("link", domain), domain), member)
    r.zadd(in_shard(r, keys.delayed("link"), domain), {f"{domain}\t{member}": time.time() + 60})
    requests = in_shard(r, keys.crawl_requests("link", record["appid"], record["crawlid"], domain), domain)
    field = crawl_request.field_of(member.decode() if isinstance(member, bytes) else member)
    profile_id = crawl_request.profile_id(r.hget(requests, field))
    r.hset(requests, field, profile_id + crawl_request.encode({**record, "priority": priority}).payload)
    progress = in_shard(r, keys.crawl_progress("link", record["appid"], record["crawlid"]), domain)
    r.hincrby(progress, "queued", -1)
    r.hincrby(progress, "retrying", 1)


@pytest.fixture
def frontier(cluster: TestCluster) -> Frontier:
    f = frontier_of(cluster)
    assert seed(f, "testapp", "ABC123", CRAWL_A) == ["queued"] * 5
    assert seed(f, "testapp", "other", CRAWL_B) == ["queued"] * 3
    return f


def test_info_of_a_crawl_reports_its_pending_requests_and_progress(cluster, frontier, topic_reader) -> None:
    r = frontier.client
    r.set(keys.timeout("link", "testapp", "ABC123"), "1999999999")
    (lease,) = frontier.pop("link", 1, OPEN).leases  # the priority-90 request goes in flight
    assert lease.record["url"] == "http://a.com/1"
    delay_lowest(r, "b.org", priority=8)  # as retry.lua leaves a request waiting to retry
    outbound = topic_reader("outbound_firehose")
    first, second = info("ABC123"), info("ABC123")  # identical but for the uuid: both are answered
    add_jobs(r, "action", [first, second])
    with running_monitor(cluster, **FAST) as monitor:
        got = drive(monitor, answered(outbound, [first["uuid"], second["uuid"]]))

    answer = got[first["uuid"]]
    assert set(answer) == {"uuid", "total_pending", "server_time", "appid", "crawlid", "spiderid",
                           "total_domains", "domains", "expires", "progress", "dupefilter"}  # fmt: skip
    assert answer["dupefilter"] == {"mode": "exact", "seen": answer["dupefilter"]["seen"], "false_drop_rate": 0.0}
    assert (answer["appid"], answer["crawlid"], answer["spiderid"]) == ("testapp", "ABC123", "link")
    assert answer["total_pending"] == 4
    assert answer["total_domains"] == 2
    assert answer["domains"] == {
        "a.com": {"total": 1, "high_priority": 50, "low_priority": 50},
        "b.org": {"total": 3, "high_priority": 20, "low_priority": 8},
    }
    assert answer["expires"] == "1999999999"
    assert isinstance(answer["server_time"], int)
    progress = answer["progress"]
    assert (progress["queued"], progress["inflight"], progress["retrying"], progress["enqueued"]) == (3, 1, 1, 5)
    assert progress["finished"] is False
    assert got[second["uuid"]]["domains"] == answer["domains"]


def test_info_of_an_app_lists_each_crawl(cluster, frontier, topic_reader) -> None:
    frontier.client.set(keys.timeout("link", "testapp", "other"), "1999999999.5")
    seed(frontier, "otherapp", "elsewhere", [("http://d.com/", "d.com", 1)])
    outbound = topic_reader("outbound_firehose")
    request = info()
    add_jobs(frontier.client, "action", [request])
    with running_monitor(cluster, **FAST) as monitor:
        answer = drive(monitor, answered(outbound, [request["uuid"]]))[request["uuid"]]

    assert set(answer) == {"uuid", "total_pending", "server_time", "appid", "spiderid", "total_crawlids",
                           "total_domains", "crawlids"}  # fmt: skip
    assert (answer["total_pending"], answer["total_crawlids"], answer["total_domains"]) == (8, 2, 4)
    abc, other = answer["crawlids"]["ABC123"], answer["crawlids"]["other"]
    assert set(abc) == {"total", "distinct_domains", "domains", "progress"}
    assert (abc["total"], abc["distinct_domains"]) == (5, 2)
    assert abc["domains"]["a.com"] == {"total": 2, "high_priority": 90, "low_priority": 50}
    assert (other["total"], other["distinct_domains"], other["expires"]) == (3, 2, 1999999999)
    assert other["domains"]["c.net"] == {"total": 2, "high_priority": 5, "low_priority": 5}


def test_stop_purges_exactly_the_crawls_requests_and_refuses_its_children(cluster, frontier, topic_reader) -> None:
    r = frontier.client
    r.set(keys.timeout("link", "testapp", "ABC123"), "1999999999")
    (lease,) = frontier.pop("link", 1, OPEN).leases
    delay_lowest(r, "b.org", priority=8)
    outbound = topic_reader("outbound_firehose")
    stop = {"action": "stop", "appid": "testapp", "crawlid": "ABC123", "spiderid": "link", "uuid": new_uuid()}
    add_jobs(r, "action", [stop])
    with running_monitor(cluster, **FAST) as monitor:
        answer = drive(monitor, answered(outbound, [stop["uuid"]]))[stop["uuid"]]

    assert set(answer) == {"action", "spiderid", "appid", "crawlid", "total_purged", "uuid", "server_time"}
    assert (answer["action"], answer["total_purged"]) == ("stop", 5)  # 3 queued, 1 delayed, 1 in flight
    assert shard_sum(r, "zcard", keys.inflight("link")) == shard_sum(r, "zcard", keys.delayed("link")) == 0
    assert shard_sum(r, "exists", keys.crawl_domains("link", "testapp", "ABC123")) == 0
    assert r.exists(in_shard(r, keys.queue("link", "b.org"), "b.org")) == 0
    assert r.zscore(in_shard(r, keys.heads("link"), "b.org"), "b.org") is None
    ((left, score),) = r.zrange(
        in_shard(r, keys.queue("link", "a.com"), "a.com"), 0, -1, withscores=True
    )  # a domain both share
    assert score == -5.0
    assert stored_requests.read(r, "link", "a.com", left)["crawlid"] == "other"
    assert stored_count(r, "link", "testapp", "other") == 3
    assert r.exists(keys.timeout("link", "testapp", "ABC123")) == 0
    until = r.zscore(in_shard(r, keys.stopped("link"), "a.com"), "testapp||ABC123")
    assert 3500 < until - time.time() <= 3600
    progress = progress_hash(r, "link", "testapp", "ABC123")
    assert (progress["queued"], progress["inflight"], progress["retrying"]) == ("0", "0", "0")
    assert (progress["dropped_stopped"], progress["finished"] > "0") == ("5", True)
    assert frontier.ack([Ack.of(lease)]) == ["unknown"]  # the spider's late ack counts nothing
    record = {"url": "http://127.0.38.1/c", "appid": "testapp", "crawlid": "ABC123", "spiderid": "link", "priority": 1}
    stored = crawl_request.encode(crawl_request.to_record(record))._asdict()
    child = NewRequest("link", "127.0.38.1", 1, "testapp", "ABC123", fingerprint=b"12345678", **stored)
    assert frontier.enqueue([child]) == ["blacklist"]


def test_stop_without_crawlid_is_answered_with_an_error(cluster, topic_reader) -> None:
    r = redis_client(cluster.settings, decode=True)
    outbound = topic_reader("outbound_firehose")
    stop = {"action": "stop", "appid": "testapp", "spiderid": "link", "uuid": new_uuid()}
    add_jobs(r, "action", [stop])
    with running_monitor(cluster, **FAST) as monitor:
        answer = drive(monitor, answered(outbound, [stop["uuid"]]))[stop["uuid"]]
    assert answer["action"] == "error"
    assert answer["error"]["message"] == "Stop requests need a crawlid and appid"
    assert answer["appid"] == "testapp"


def test_an_expired_crawl_is_purged_and_announced_once(cluster, frontier, topic_reader) -> None:
    r = frontier.client
    r.set(keys.timeout("link", "testapp", "other"), str(int(time.time()) - 1))
    r.set(keys.timeout("link", "testapp", "ABC123"), str(int(time.time()) + 3600))
    outbound = topic_reader("outbound_firehose")
    with running_monitor(cluster, **FAST) as first, running_monitor(cluster, **FAST) as second:

        def expired() -> list[dict]:
            first.run_once()
            second.run_once()
            outbound.poll(0.1)
            return [m for m in outbound.messages if m.get("action") == "expired"]

        (answer,) = drive(first, expired)
        outbound.poll(1.0)
    assert [m for m in outbound.messages if m.get("action") == "expired"] == [answer]
    assert answer == {"action": "expired", "appid": "testapp", "crawlid": "other", "spiderid": "link",
                      "total_expired": 3, "server_time": answer["server_time"]}  # fmt: skip
    assert stored_count(r, "link", "testapp", "other") == 0
    assert stored_count(r, "link", "testapp", "ABC123") == 5
    assert progress_hash(r, "link", "testapp", "other").get("dropped_expired") == "3"
    assert r.zscore(in_shard(r, keys.stopped("link"), "a.com"), "testapp||other") is not None


def test_a_failing_job_is_tried_three_times_then_answered_with_an_error(cluster, topic_reader) -> None:
    r = redis_client(cluster.settings, decode=True)
    outbound, dead = topic_reader("outbound_firehose"), topic_reader("dead_letter")
    broken = {"action": "info", "appid": "testapp", "uuid": new_uuid(), "crawlid": "x", "spiderid": "link"}
    r.rpush(keys.timeout("link", "testapp", "x"), "not a string")  # its GET fails: WRONGTYPE, every attempt
    add_jobs(r, "action", [broken])
    with running_monitor(cluster, **FAST) as monitor:
        answer = drive(monitor, answered(outbound, [broken["uuid"]]))[broken["uuid"]]
        (letter,) = dead.wait_for(lambda got: len(got) >= 1, timeout=15)
        drive(monitor, lambda: r.xlen(keys.JOBS) == 0)
    assert answer["action"] == "error"
    assert answer["error"]["message"] == "Could not process action within failure limit"
    assert "WRONGTYPE" in answer["error"]["cause"]
    assert answer["data"] == broken
    assert (letter["attempts"], letter["source"]) == (3, "redis-monitor")
    assert r.xpending(keys.JOBS, keys.JOBS_GROUP)["pending"] == 0


def test_jobs_are_answered_once_across_monitors_and_taken_over_from_a_dead_one(cluster, topic_reader) -> None:
    r = redis_client(cluster.settings, decode=True)
    outbound = topic_reader("outbound_firehose")
    requests = [info("nothing") for _ in range(30)]
    with (
        running_monitor(cluster, **FAST) as dead,
        running_monitor(cluster, **FAST) as a,
        running_monitor(cluster, **FAST) as b,
    ):
        add_jobs(r, "action", requests[:1])
        (taken,) = dead.jobs.read(1)  # read, then its monitor "dies": never answered
        add_jobs(r, "action", requests[1:])

        def all_answered() -> dict:
            a.run_once(max_items=5)
            b.run_once(max_items=5)
            return answered(outbound, [q["uuid"] for q in requests])()

        drive(a, all_answered, timeout=30)
        outbound.poll(1.0)
    uuids = [m["uuid"] for m in outbound.messages]
    assert sorted(uuids) == sorted(q["uuid"] for q in requests)  # each exactly once
    assert taken.uuid == requests[0]["uuid"]
    assert r.xlen(keys.JOBS) == 0
