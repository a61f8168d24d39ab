"""The log under a kafka monitor starts afresh while Redis keeps its data (issue 21 item 1).

A broker restarted without its log, a topic deleted and created again, another Kafka cluster
pointed at the same Redis: each reuses offsets the monitor already wrote in Redis. Every request
fed afterwards must be queued and answered "queued"; only the very same message of the same log
(a real replay) is ever skipped.
"""

from __future__ import annotations

import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient

from kafka_monitor.monitor import KafkaMonitor
from tests.support.cluster import TestCluster
from tests.support.frontier_keys import progress_hash
from tests.support.kafka import TopicReader, produce
from tests.support.services import wait_until
from utils.config.clients import ensure_topics, redis_client
from utils.config.settings import Settings
from utils.services import LocalServices, start_local_services
from utils.services.local import build_service

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]


@pytest.fixture
def own_broker(tmp_path: Path) -> Iterator[LocalServices]:
    """A broker of this test alone: restarting it disturbs no other test."""
    with start_local_services(tmp_path / "own-broker", services=["kafka"]) as own:
        yield own


def start_afresh(own: LocalServices) -> None:
    """The broker stopped, its log wiped, and a new one started on the same address (a node that lost
    its disk; `shoal down` + `shoal up` of a broker that keeps nothing): offsets start at 0 again."""
    old = own.broker
    old.stop()
    shutil.rmtree(old.data_dir)
    fresh = build_service("kafka", own.run_dir, old.port)
    fresh.start()
    fresh.wait_ready(90)
    own.services["kafka"] = fresh


def crawls(crawlid: str, n: int) -> list[dict[str, Any]]:
    return [{"url": f"http://restart.com/{crawlid}/{i}", "appid": "testapp", "crawlid": crawlid,
             "uuid": f"{crawlid}-{i}-{uuid.uuid4().hex[:6]}"} for i in range(n)]  # fmt: skip


def enqueued(settings: Settings, crawlid: str) -> int:
    counts = progress_hash(redis_client(settings), "link", "testapp", crawlid)
    return int(counts.get(b"enqueued") or 0)


def ingest(settings: Settings, messages: list[dict[str, Any]]) -> None:
    """Feed `messages` through a fresh monitor process-alike until it has completed them all."""
    bootstrap = settings.get_list("KAFKA_HOSTS")[0]
    ensure_topics(settings, [settings.incoming_topic])
    km = KafkaMonitor.from_settings(settings)
    done = 0
    try:
        produce(bootstrap, settings.incoming_topic, messages)

        def completed() -> bool:
            nonlocal done
            done += km.run_once()
            return done >= len(messages)

        wait_until(completed, timeout=60, interval=0, message=f"only {done} of {len(messages)} completed")
    finally:
        km.close()


def answered_queued(settings: Settings, messages: list[dict[str, Any]]) -> set[str]:
    """The uuids of `messages` answered {"status": "queued"} on the outbound topic."""
    wanted = {m["uuid"] for m in messages}
    reader = TopicReader(settings.get_list("KAFKA_HOSTS")[0], settings.topic("outbound_firehose"))
    try:
        reader.wait_for(lambda got: wanted <= {a.get("uuid") for a in got}, timeout=30)
        return {a["uuid"] for a in reader.messages if a.get("uuid") in wanted and a.get("status") == "queued"}
    finally:
        reader.close()


def assert_all_queued(settings: Settings, crawlid: str, messages: list[dict[str, Any]]) -> None:
    assert enqueued(settings, crawlid) == len(messages)
    assert answered_queued(settings, messages) == {m["uuid"] for m in messages}


@pytest.mark.single_redis
def test_a_broker_restarted_afresh_with_redis_kept_queues_every_new_request(
    cluster: TestCluster, own_broker: LocalServices
) -> None:
    settings = cluster.settings.copy_with(KAFKA_HOSTS=own_broker.broker.address, KAFKA_TOPIC_PARTITIONS=1)
    before = crawls("before", 12)
    ingest(settings, before)
    assert_all_queued(settings, "before", before)

    start_afresh(own_broker)
    after = crawls("after", 24)
    ingest(settings, after)
    assert_all_queued(settings, "after", after)


@pytest.mark.single_redis
def test_a_second_cluster_with_the_same_redis_queues_every_request(
    cluster: TestCluster, own_broker: LocalServices
) -> None:
    first = cluster.settings.copy_with(KAFKA_TOPIC_PARTITIONS=1)
    second = cluster.settings.copy_with(KAFKA_HOSTS=own_broker.broker.address, KAFKA_TOPIC_PARTITIONS=1)
    on_first, on_second = crawls("first", 10), crawls("second", 15)
    ingest(first, on_first)
    ingest(second, on_second)  # same topic names, same group, same Redis; offsets 0.. again
    assert_all_queued(first, "first", on_first)
    assert_all_queued(second, "second", on_second)


def test_a_topic_deleted_and_created_again_queues_every_new_request(cluster: TestCluster) -> None:
    settings = cluster.settings.copy_with(KAFKA_TOPIC_PARTITIONS=1)
    old = crawls("old-topic", 8)
    ingest(settings, old)
    assert_all_queued(settings, "old-topic", old)

    admin = AdminClient({"bootstrap.servers": settings.get_list("KAFKA_HOSTS")[0]})
    topic = settings.incoming_topic
    for future in admin.delete_topics([topic], operation_timeout=10).values():
        future.result(30)
    wait_until(lambda: topic not in admin.list_topics(timeout=10).topics, timeout=30)
    new = crawls("new-topic", 12)
    ingest(settings, new)  # ensure_topics creates it again: offsets from 0
    assert_all_queued(settings, "new-topic", new)


def test_an_answer_says_queued_only_for_a_request_that_is_queued(cluster: TestCluster) -> None:
    """A seed over its crawl's domain_max_pages is not queued: its answer says so, with the reason."""
    settings = cluster.settings.copy_with(KAFKA_TOPIC_PARTITIONS=1)
    messages = [{**m, "domain_max_pages": 2} for m in crawls("limited", 3)]
    ingest(settings, messages)
    assert enqueued(settings, "limited") == 2
    reader = TopicReader(settings.get_list("KAFKA_HOSTS")[0], settings.topic("outbound_firehose"))
    try:
        wanted = [m["uuid"] for m in messages]
        reader.wait_for(lambda got: set(wanted) <= {a.get("uuid") for a in got}, timeout=30)
        answers = {a["uuid"]: a for a in reader.messages if a.get("uuid") in wanted}
    finally:
        reader.close()
    assert [(answers[u]["status"], answers[u].get("reason")) for u in wanted] == [
        ("queued", None), ("queued", None), ("dropped", "page_limit"),
    ]  # fmt: skip
