"""The kafka monitor on the real broker and Redis: every reference example, every error, its stats.

Each example request of reference §3 is fed through the incoming topic and the Redis state it
leaves is checked: crawl requests in their queue (payload, score, timeout key), action, stats and
zookeeper requests as jobs in `shoal:jobs`. Every kind of bad input gets its error answer and its
dead letter; a replayed batch writes nothing twice.
"""

from __future__ import annotations

import json
import logging
import time
from typing import Any

import pytest

from kafka_monitor.batch import Batch, Origin
from kafka_monitor.monitor import KafkaMonitor
from tests.support.cluster import TestCluster
from tests.support.frontier_keys import every_key, in_shard, progress_hash
from tests.support.kafka import produce
from tests.support.services import wait_until
from utils.config.clients import redis_client
from utils.frontier import crawl_request, keys, stored_requests
from utils.jobs.stream import Job

pytestmark = pytest.mark.integration

CRAWL = {"url": "http://www.dmoztools.net/", "appid": "testapp", "crawlid": "abc123", "maxdepth": 2, "priority": 90}
INFO_CRAWL = {"action": "info", "appid": "testapp", "crawlid": "ABC123", "uuid": "abc12333", "spiderid": "link"}
INFO_APP = {"action": "info", "appid": "testapp", "uuid": "abc12334", "spiderid": "link"}
STOP = {"action": "stop", "appid": "testapp", "crawlid": "ist234", "uuid": "1ist234", "spiderid": "link"}
STATS = {"appid": "testapp", "uuid": "hij1", "stats": "spider"}
STATS_DEFAULT = {"appid": "testapp", "uuid": "hij2"}
ZOOKEEPER = {"uuid": "abc123", "appid": "madisonTest", "action": "domain-update", "domain": "dmoztools.net",
             "hits": 60, "window": 60, "scale": 0.9}  # fmt: skip


def drain(monitor: KafkaMonitor, expected: int, timeout: float = 30) -> int:
    handled, deadline = 0, time.monotonic() + timeout
    while handled < expected and time.monotonic() < deadline:
        handled += monitor.run_once()
    return handled


def feed(cluster: TestCluster, messages: list[Any]) -> None:
    produce(cluster.settings.get_list("KAFKA_HOSTS")[0], cluster.settings.incoming_topic, messages)


def jobs(cluster: TestCluster) -> list[Job]:
    return [Job.from_entry(i, f) for i, f in redis_client(cluster.settings).xrange(keys.JOBS)]


@pytest.fixture
def monitor(cluster: TestCluster):
    km = KafkaMonitor.from_settings(cluster.settings)
    yield km
    km.close()


def test_the_crawl_example_is_queued_with_defaults_ts_and_expiry(cluster: TestCluster, monitor, topic_reader) -> None:
    request = {**CRAWL, "expires": int(time.time()) + 3600, "uuid": "ack-1"}
    outbound = topic_reader("outbound_firehose")
    feed(cluster, [request])
    assert drain(monitor, 1) == 1

    r = redis_client(cluster.settings)
    queue = in_shard(r, keys.queue("link", "dmoztools.net"), "dmoztools.net")
    ((member, score),) = r.zrange(queue, 0, -1, withscores=True)
    assert score == -90
    stored = crawl_request.from_record(stored_requests.read(r, "link", "dmoztools.net", member))
    for field, value in {**request, "spiderid": "link", "domain_max_pages": None, "allowed_domains": None,
                         "allow_regex": None, "deny_regex": None, "deny_extensions": None, "useragent": None,
                         "cookie": None, "attrs": None, "curdepth": 0}.items():  # fmt: skip
        assert stored[field] == value, field
    assert abs(stored["ts"] - time.time()) < 30
    timeout_key = keys.timeout("link", "testapp", "abc123")
    assert r.get(timeout_key) == str(request["expires"]).encode()
    assert 3600 < r.ttl(timeout_key) <= 3600 + cluster.settings.get_int("CRAWL_STATE_TIMEOUT")
    assert r.zscore(keys.TIMEOUTS, keys.crawl_member("link", "testapp", "abc123")) == request["expires"]
    progress = progress_hash(r, "link", "testapp", "abc123")
    assert progress[b"queued"] == b"1" and progress[b"enqueued"] == b"1"  # noqa: PT018

    (ack,) = outbound.wait_for(lambda got: len(got) >= 1, timeout=15)
    assert ack["action"] == "crawl" and ack["status"] == "queued"  # noqa: PT018
    assert (ack["uuid"], ack["appid"], ack["crawlid"], ack["spiderid"]) == ("ack-1", "testapp", "abc123", "link")


def test_a_crawl_without_expires_or_uuid_sets_no_timeout_and_sends_no_answer(cluster: TestCluster, monitor) -> None:
    feed(cluster, [{"url": "example.com/a", "appid": "testapp", "crawlid": "plain"}])
    assert drain(monitor, 1) == 1
    r = redis_client(cluster.settings)
    (member,) = r.zrange(in_shard(r, keys.queue("link", "example.com"), "example.com"), 0, -1)
    assert stored_requests.read(r, "link", "example.com", member)["url"] == "http://example.com/a"
    assert r.exists(keys.timeout("link", "testapp", "plain")) == 0


def test_action_stats_and_zookeeper_examples_become_jobs_keyed_by_uuid(cluster: TestCluster, monitor) -> None:
    examples = [INFO_CRAWL, INFO_APP, STOP, STATS, STATS_DEFAULT, ZOOKEEPER]
    kinds = ["action", "action", "action", "stats", "stats", "zookeeper"]
    kinds_by_uuid = {m["uuid"]: k for m, k in zip(examples, kinds, strict=True)}
    feed(cluster, examples)
    assert drain(monitor, len(examples)) == len(examples)

    found = {job.uuid: job for job in jobs(cluster)}
    assert set(found) == set(kinds_by_uuid)
    for example in examples:
        job = found[example["uuid"]]
        assert job.kind == kinds_by_uuid[job.uuid]
        assert job.appid == example["appid"]
        assert {k: job.request[k] for k in example} == example  # the validated request, as sent
        assert job.origin.startswith(cluster.settings.incoming_topic + "/")
        assert abs(job.received - time.time()) < 60
    assert found["hij2"].request["stats"] == "all"  # the default, filled in
    assert (found["abc123"].request["hits"], found["abc123"].request["scale"]) == (60, 0.9)


def test_every_stats_kind_and_zookeeper_action_is_accepted(cluster: TestCluster, monitor) -> None:
    kinds = ["kafka-monitor", "redis-monitor", "crawler", "spider", "machine", "queue", "rest", "all"]
    stats = [{"appid": "testapp", "uuid": f"s-{kind}", "stats": kind} for kind in kinds]
    actions = ["domain-update", "domain-remove", "blacklist-update", "blacklist-remove"]
    zk = [{**ZOOKEEPER, "uuid": f"z-{action}", "action": action} for action in actions]
    feed(cluster, stats + zk)
    assert drain(monitor, len(stats) + len(zk)) == len(stats) + len(zk)
    assert sorted(job.uuid for job in jobs(cluster)) == sorted(m["uuid"] for m in stats + zk)


def test_identical_requests_both_become_jobs(cluster: TestCluster, monitor) -> None:
    feed(cluster, [STATS, STATS, INFO_APP, INFO_APP])
    assert drain(monitor, 4) == 4
    assert sorted(job.uuid for job in jobs(cluster)) == ["abc12334", "abc12334", "hij1", "hij1"]


BAD = [
    (b"{not json", "Unparseable JSON Received", None),
    (b'["a list"]', "Did not find schema to validate request", None),
    ({**CRAWL, "uuid": "u-unknown", "colour": "red"}, "Did not find schema to validate request", "colour"),
    ({**CRAWL, "uuid": "u-range", "priority": 500}, "Did not find schema to validate request", "priority"),
    ({**CRAWL, "uuid": "u-nohost", "url": "http://"}, "invalid crawl request", "url"),
    ({**STATS, "uuid": "u-kind", "stats": "everything"}, "Did not find schema to validate request", "stats"),
    ({**STOP, "uuid": "u-stop", "crawlid": None}, "Did not find schema to validate request", "crawlid"),
    ({k: v for k, v in STOP.items() if k != "crawlid"} | {"uuid": "u-stop2"},
     "Stop requests need a crawlid and appid", "crawlid"),
    ({**INFO_APP, "uuid": "u-dl", "action": "dead-letters"}, "dead-letters requests need a crawlid", "crawlid"),
    ({**INFO_APP, "uuid": "u-rdl", "action": "replay-dead-letters"},
     "replay-dead-letters requests need a crawlid", "crawlid"),
    ({**INFO_APP, "uuid": "u-pdl", "action": "purge-dead-letters"},
     "purge-dead-letters requests need a crawlid", "crawlid"),
    ({**ZOOKEEPER, "uuid": "u-hits", "hits": 0}, "'hits' and 'window' not set for domain update", "hits"),
    ({**ZOOKEEPER, "uuid": "u-window", "window": 0}, "'hits' and 'window' not set for domain update", "window"),
]  # fmt: skip


def test_every_rejected_message_is_answered_and_dead_lettered(cluster: TestCluster, monitor, topic_reader) -> None:
    outbound, dead = topic_reader("outbound_firehose"), topic_reader("dead_letter")
    feed(cluster, [raw for raw, _, _ in BAD])
    assert drain(monitor, len(BAD)) == len(BAD)

    answers = outbound.wait_for(lambda got: len(got) >= len(BAD), timeout=15)
    letters = dead.wait_for(lambda got: len(got) >= len(BAD), timeout=15)
    by_data = {_key(answer["data"]): answer for answer in answers}  # partitions do not keep order
    letter_by_data = {_key(letter["data"]): letter for letter in letters}
    for raw, message, cause in BAD:
        answer, letter = by_data[_key(raw)], letter_by_data[_key(raw)]
        assert answer["action"] == "error"
        assert answer["error"]["message"] == message
        if cause:
            assert cause in answer["error"]["cause"]
            assert answer["uuid"] == raw["uuid"] and answer["appid"] == raw["appid"]  # noqa: PT018
        assert isinstance(answer["server_time"], int)
        assert letter["source"] == "kafka-monitor" and message in letter["error"]  # noqa: PT018
        assert letter["topic"] == cluster.settings.incoming_topic
    assert not every_key(redis_client(cluster.settings), "*link:*")  # nothing queued (in any shard)
    assert not jobs(cluster)


class Exploding:
    """A plugin with a bug: it fails on every stats request."""

    schema = "stats"
    rank = 0

    def handle(self, message: dict[str, Any], origin: Origin, batch: Batch) -> None:
        raise KeyError("boom")


def test_a_handler_failure_is_answered_and_the_monitor_goes_on(cluster: TestCluster, topic_reader) -> None:
    plugins = {**cluster.settings.get_dict("KAFKA_MONITOR_PLUGINS"), f"{__name__}.Exploding": 50}
    km = KafkaMonitor.from_settings(cluster.settings.copy_with(KAFKA_MONITOR_PLUGINS=plugins))
    outbound, dead = topic_reader("outbound_firehose"), topic_reader("dead_letter")
    try:
        feed(cluster, [STATS, {**CRAWL, "uuid": "after"}])
        assert drain(km, 2) == 2
    finally:
        km.close()
    answers = outbound.wait_for(lambda got: len(got) >= 2, timeout=15)
    error = next(a for a in answers if a["action"] == "error")
    assert error["uuid"] == "hij1" and error["error"]["message"] == "Handler failed"  # noqa: PT018
    assert "KeyError" in error["error"]["cause"]
    assert any(a["action"] == "crawl" and a["uuid"] == "after" for a in answers)
    dead.wait_for(lambda got: len(got) >= 1, timeout=15)


class CrashBeforeCommit(KafkaMonitor):
    """A monitor that dies after its Redis writes and answers, before committing its offsets."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.partitions.commit = lambda records: None  # type: ignore[method-assign]


def test_a_batch_replayed_after_a_crash_queues_and_adds_nothing_twice(cluster: TestCluster) -> None:
    crawls = [{"url": f"http://site{i % 3}.com/p{i}", "appid": "testapp", "crawlid": "replay"} for i in range(30)]
    feed(cluster, crawls + [STATS, INFO_APP])
    first = CrashBeforeCommit.from_settings(cluster.settings)
    try:
        assert drain(first, 32) == 32
    finally:
        first.close()
    again = KafkaMonitor.from_settings(cluster.settings)  # same group: reads the same offsets again
    try:
        assert drain(again, 32) == 32
    finally:
        again.close()
    r = redis_client(cluster.settings)
    queued = sum(r.zcard(in_shard(r, keys.queue("link", f"site{i}.com"), f"site{i}.com")) for i in range(3))
    assert queued == 30
    progress = progress_hash(r, "link", "testapp", "replay")
    assert (progress[b"enqueued"], progress[b"queued"]) == (b"30", b"30")
    assert not any(k.startswith(b"dropped") for k in progress)
    assert sorted(job.uuid for job in jobs(cluster)) == ["abc12334", "hij1"]


def test_stats_counters_heartbeat_and_state_all_expire(cluster: TestCluster, caplog: pytest.LogCaptureFixture) -> None:
    settings = cluster.settings.copy_with(STATS_CYCLE=0.0, STATS_DUMP=0.1)
    km = KafkaMonitor.from_settings(settings)
    caplog.set_level(logging.INFO, logger="kafka_monitor")
    try:
        feed(cluster, [CRAWL, STATS, b"nope", {**STATS, "uuid": "x", "colour": 1}])
        assert drain(km, 4) == 4
        time.sleep(0.15)  # one STATS_DUMP period (0.1 s) must pass before the dump is due
        km.run_once()
    finally:
        km.close()
    r = redis_client(cluster.settings)
    base = "stats:kafka-monitor:"
    for name, count in (("total", 4), ("fail", 2), ("ScraperHandler", 1), ("StatsHandler", 1)):
        assert r.get(f"{base}{name}:lifetime") == str(count).encode(), name
    written = [k.decode() for k in every_key(r, f"{base}*")] + ["stats:index", "stats:heartbeats"]
    assert any(":self:" in k for k in written) and any(":state:" in k for k in written)  # noqa: PT018
    for key in written:
        assert r.ttl(key) > 0, f"{key} has no TTL"
    state = next(k for k in written if ":state:" in k)
    assert r.hget(state, "backpressure") == b"running"
    (*_, dump) = (rec for rec in caplog.records if rec.getMessage() == "Kafka Monitor Stats Dump")
    assert dump.total_lifetime == 4 and dump.fail_lifetime == 2 and dump.plugin_ScraperHandler_900 == 1  # noqa: PT018
    assert dump.backpressure == "running"


def test_missing_topics_are_created_with_the_configured_partitions(cluster: TestCluster) -> None:
    from kafka import KafkaConsumer

    km = KafkaMonitor.from_settings(cluster.settings.copy_with(KAFKA_TOPIC_PARTITIONS=4))
    km.close()
    probe = KafkaConsumer(bootstrap_servers=cluster.settings.get_list("KAFKA_HOSTS"))
    try:
        for suffix in ("incoming", "outbound_firehose", "dead_letter", "crawled_firehose"):
            partitions = probe.partitions_for_topic(cluster.settings.topic(suffix))
            assert partitions == {0, 1, 2, 3}, suffix
    finally:
        probe.close()


def test_backpressure_pauses_consumption_and_resumes_below_the_low_mark(
    cluster: TestCluster, caplog: pytest.LogCaptureFixture
) -> None:
    settings = cluster.settings.copy_with(
        KAFKA_MONITOR_BACKLOG_HIGH_WATER=5, KAFKA_MONITOR_BACKLOG_LOW_WATER=2,
        KAFKA_MONITOR_BACKPRESSURE_INTERVAL=0.05, STATS_CYCLE=0.0,
    )  # fmt: skip
    caplog.set_level(logging.INFO, logger="kafka_monitor")
    crawl = [{"url": f"http://a.example.com/{i}", "appid": "testapp", "crawlid": "bp"} for i in range(15)]
    r = redis_client(cluster.settings)
    queue = in_shard(r, keys.queue("link", "example.com"), "example.com")
    km = KafkaMonitor.from_settings(settings)
    try:
        feed(cluster, crawl[:5])
        assert drain(km, 5) == 5  # the backlog is now at the high-water mark
        wait_until(lambda: km.run_once() == 0 and km.consumer.paused(), timeout=10, interval=0)
        feed(cluster, crawl[5:])
        deadline = time.monotonic() + 1.0  # a second of polls while paused reads nothing
        while time.monotonic() < deadline:
            assert km.run_once() == 0
        assert r.zcard(queue) == 5
        state = next(k for k in every_key(r, "stats:kafka-monitor:state:*"))
        assert r.hget(state, "backpressure") == b"paused" and r.hget(state, "backpressure_backlog") == b"5"  # noqa: PT018
        r.zremrangebyrank(queue, 0, 3)  # crawlers took four: the backlog (1) is under the low mark
        assert drain(km, 10) == 10
    finally:
        km.close()
    assert r.zcard(queue) == 11
    messages = [rec.getMessage() for rec in caplog.records if rec.getMessage().startswith("Backpressure")]
    assert messages[:2] == ["Backpressure on: consumption paused", "Backpressure off: consumption resumed"]


def _key(data: object) -> str:
    """The same key for a raw message and for its echo in an answer's `data`."""
    if isinstance(data, bytes):
        try:
            data = json.loads(data)
        except ValueError:
            data = data.decode()
    return json.dumps(data, sort_keys=True)
