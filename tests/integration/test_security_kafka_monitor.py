"""Hostile crawl requests against the real kafka monitor, broker and Redis (issue 24).

Each attack reproduced by the security review is fed through the incoming topic between good
messages: the attack is refused with an answer and a dead letter, and every good message of the
same poll is queued (one poison message never costs any other).
"""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from kafka_monitor.monitor import KafkaMonitor
from tests.support.cluster import TestCluster
from tests.support.frontier_keys import every_key, in_shard
from tests.support.kafka import produce
from tests.support.services import wait_until
from utils.config.clients import ensure_topics, redis_client
from utils.frontier import keys
from utils.observability.metrics import is_healthy, set_dependency_up
from utils.observability.metrics.registry import STATE

pytestmark = pytest.mark.integration

GOOD = {"url": "http://good.example.com/", "appid": "goodapp", "crawlid": "good1"}


def drain(monitor: KafkaMonitor, expected: int, timeout: float = 30) -> int:
    handled, deadline = 0, time.monotonic() + timeout
    while handled < expected and time.monotonic() < deadline:
        handled += monitor.run_once()
    return handled


@pytest.fixture
def monitor(cluster: TestCluster):
    km = KafkaMonitor.from_settings(cluster.settings)
    yield km
    km.close()


def feed(cluster: TestCluster, messages: list[Any]) -> None:
    produce(cluster.settings.get_list("KAFKA_HOSTS")[0], cluster.settings.incoming_topic, messages)


def good(n: int) -> dict[str, Any]:
    return {**GOOD, "url": f"http://good.example.com/{n}", "uuid": f"good-{n}"}


def queued_good(cluster: TestCluster) -> int:
    r = redis_client(cluster.settings)
    return r.zcard(in_shard(r, keys.queue("link", "example.com"), "example.com"))


ATTACKS = [
    ({**GOOD, "uuid": "file", "url": "file://localhost/proc/self/environ"}, "url"),
    ({**GOOD, "uuid": "file2", "url": "FILE:///etc/passwd"}, "url"),
    ({**GOOD, "uuid": "ftp", "url": "ftp://127.0.0.1/x"}, "url"),
    ({**GOOD, "uuid": "expires", "expires": 1e20}, "expires"),
    ({**GOOD, "uuid": "colon", "appid": "app:x"}, "appid"),
    ({**GOOD, "uuid": "tab", "crawlid": "c\tx"}, "crawlid"),
    ({**GOOD, "uuid": "spider", "spiderid": "link:queue"}, "spiderid"),
    ({**GOOD, "uuid": "redos", "allow_regex": ["(a+)+\\1$"]}, "regex"),
    ({**GOOD, "uuid": "lookbehind", "deny_regex": ["(?<=a)b"]}, "regex"),
    ({**GOOD, "uuid": "invalid", "allow_regex": ["("]}, "regex"),
    ({"uuid": "zk-nan", "appid": "goodapp", "action": "domain-update", "domain": "example.com", "hits": 5,
      "window": 5, "scale": float("nan")}, None),
    ({"uuid": "stats", "appid": "bad app", "stats": "all"}, "appid"),
]  # fmt: skip


def _raw(message: dict[str, Any]) -> bytes:
    return json.dumps(message, allow_nan=True).encode()


def test_each_attack_is_answered_and_dead_lettered_and_costs_no_other_message(
    cluster: TestCluster, monitor, topic_reader
) -> None:
    outbound, dead = topic_reader("outbound_firehose"), topic_reader("dead_letter")
    messages: list[Any] = []
    for i, (attack, _) in enumerate(ATTACKS):
        messages += [good(i), _raw(attack)]
    messages.append(good(len(ATTACKS)))
    feed(cluster, messages)
    assert drain(monitor, len(messages)) == len(messages)

    assert queued_good(cluster) == len(ATTACKS) + 1
    answers = outbound.wait_for(lambda got: sum(a.get("action") == "error" for a in got) >= len(ATTACKS), 20)
    errors = {a.get("uuid"): a for a in answers if a.get("action") == "error"}
    letters = dead.wait_for(lambda got: len(got) >= len(ATTACKS), 20)
    assert len(letters) == len(ATTACKS)
    for attack, cause in ATTACKS:
        answer = errors.get(attack["uuid"]) or next(a for a in errors.values() if attack["uuid"] in str(a["data"]))
        if cause:
            assert cause in answer["error"].get("cause", ""), (attack, answer)
    r = redis_client(cluster.settings)
    assert not every_key(r, "*app:x*")
    assert not every_key(r, "*\t*")
    assert not every_key(r, "timeout:*")  # expires 1e20 set nothing


def test_a_lone_surrogate_or_nan_is_refused_alone(cluster: TestCluster, monitor, topic_reader) -> None:
    dead = topic_reader("dead_letter")
    poison = [
        b'{"url": "http://good.example.com/s", "appid": "good\\ud800app", "crawlid": "c1", "uuid": "s1"}',
        b'{"url": "http://good.example.com/r", "appid": "good\xed\xa0\x80app", "crawlid": "c1", "uuid": "s2"}',
        b'{"url": "http://good.example.com/n", "appid": "goodapp", "crawlid": "c1", "priority": NaN}',
        b'{"url": "http://good.example.com/i", "appid": "goodapp", "crawlid": "c1", "attrs": {"x": -Infinity}}',
    ]
    messages: list[Any] = [good(0), *poison, good(1)]
    feed(cluster, messages)
    assert drain(monitor, len(messages)) == len(messages)
    assert queued_good(cluster) == 2
    letters = dead.wait_for(lambda got: len(got) >= len(poison), 20)
    assert len(letters) == len(poison)
    assert all("Unparseable JSON" in letter["error"] for letter in letters)


def test_a_message_redis_refuses_is_isolated_and_the_rest_of_the_poll_is_written(
    cluster: TestCluster, monitor, topic_reader
) -> None:
    """A crawl whose dupefilter key was overwritten with a list makes the enqueue script fail."""
    r = redis_client(cluster.settings)
    for key in (keys.dupefilter("link", "broken"), keys.bloom_dupefilter("link", "broken")):
        r.rpush(in_shard(r, key, "example.com"), "not a set")
    outbound, dead = topic_reader("outbound_firehose"), topic_reader("dead_letter")
    broken = {**GOOD, "crawlid": "broken", "url": "http://good.example.com/broken", "uuid": "broken"}
    feed(cluster, [good(0), broken, good(1), good(2)])
    assert drain(monitor, 4) == 4
    assert queued_good(cluster) == 3
    letters = dead.wait_for(lambda got: len(got) >= 1, 20)
    assert "Redis refused" in letters[0]["error"]
    assert letters[0]["data"]["crawlid"] == "broken"
    answers = outbound.wait_for(lambda got: any(a.get("uuid") == "broken" for a in got), 20)
    assert next(a for a in answers if a.get("uuid") == "broken")["action"] == "error"
    assert sorted(a["uuid"] for a in answers if a.get("action") == "crawl") == ["good-0", "good-1", "good-2"]


def test_with_appid_topics_an_illegal_topic_name_never_holds_the_monitor(cluster: TestCluster, topic_reader) -> None:
    """An error answer echoes the refused message's appid: `outbound_bad app` is no legal topic name."""
    ensure_topics(cluster.settings, [cluster.settings.topic("outbound_goodapp")])
    km = KafkaMonitor.from_settings(cluster.settings.copy_with(KAFKA_APPID_TOPICS=True))
    outbound, own = topic_reader("outbound_firehose"), topic_reader("outbound_goodapp")
    try:
        feed(cluster, [{**GOOD, "uuid": "bad", "appid": "bad app"}, {**GOOD, "uuid": "bad2", "appid": "x" * 40 + "/"},
                       good(0)])  # fmt: skip
        assert drain(km, 3, timeout=30) == 3
    finally:
        km.close()
    answers = outbound.wait_for(lambda got: len(got) >= 3, 20)
    assert {a["uuid"] for a in answers} == {"bad", "bad2", "good-0"}
    assert [a["uuid"] for a in own.wait_for(lambda got: len(got) >= 1, 20)] == ["good-0"]


def test_a_monitor_that_lost_its_partitions_reports_itself_unhealthy(cluster: TestCluster) -> None:
    with STATE.lock:  # health is process-wide: forget what earlier tests of this process reported
        STATE.dependencies.clear()
    km = KafkaMonitor.from_settings(cluster.settings.copy_with(KAFKA_MONITOR_UNASSIGNED_GRACE=0.5))
    try:
        wait_until(lambda: (km.run_once(), bool(km.consumer.assignment()))[1], timeout=30,
                   message="the monitor never got a partition")  # fmt: skip
        km.run_once()
        assert is_healthy()
        km.consumer.unsubscribe()  # the group took every partition away
        wait_until(lambda: (km.run_once(), not is_healthy())[1], timeout=10, message="still healthy")
        assert is_healthy() is False
        km.consumer.subscribe([cluster.settings.incoming_topic], listener=km.partitions.listener())
        wait_until(lambda: (km.run_once(), is_healthy())[1], timeout=30, message="never healthy again")
    finally:
        km.close()
        set_dependency_up("partitions", True)
