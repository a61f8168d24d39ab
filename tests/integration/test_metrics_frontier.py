"""Metrics read from the real services: the frontier collector on a Redis database of its own, and
Kafka consumer lag of a kafka-python consumer of the session broker."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import redis

from tests.support.frontier_keys import in_shard
from tests.support.kafka import produce
from tests.support.services import wait_until
from utils.config.clients import ensure_topics, kafka_consumer
from utils.config.settings import Settings
from utils.frontier import keys
from utils.frontier.memory import redis_memory
from utils.frontier.metrics import FrontierCollector, register_frontier_collector, unregister_frontier_collector
from utils.observability.metrics import REGISTRY, update_consumer_lag
from utils.observability.metrics.registry import STATE
from utils.observability.metrics.server import configure_process
from utils.services import free_port

pytestmark = pytest.mark.integration

QUEUES = {"link": {"a.com": 5, "b.com": 3, "c.com": 1}, "wandering": {"d.com": 4}}
PRIORITY = {"a.com": 1, "b.com": 5, "c.com": 9, "d.com": 1}  # c.com's head is served first


def _fill(client: redis.Redis) -> None:
    """A frontier as the Lua scripts leave it: queues, heads, leases, retries, crawls, jobs."""
    for spider, domains in QUEUES.items():
        client.sadd(keys.SPIDERS, spider)
        for domain, count in domains.items():
            client.zadd(in_shard(client, keys.queue(spider, domain), domain),
                        {f"{n:016x}": -PRIORITY[domain] for n in range(count)})  # fmt: skip
            client.zadd(in_shard(client, keys.heads(spider), domain), {domain: -PRIORITY[domain]})
    client.zadd(in_shard(client, keys.inflight("link"), "a.com"), {"a.com\t00000000000000aa": 1e10})
    client.zadd(in_shard(client, keys.inflight("link"), "b.com"), {"b.com\t00000000000000bb": 1e10})
    client.zadd(in_shard(client, keys.delayed("link"), "a.com"), {"a.com\t00000000000000cc": 1e10})
    client.zadd(keys.CRAWLS, {keys.crawl_member("link", "app", "c1"): 1, keys.crawl_member("link", "app", "c2"): 2})
    client.xgroup_create(keys.JOBS, keys.JOBS_GROUP, id="$", mkstream=True)
    for n in range(3):
        client.xadd(keys.JOBS, {"kind": "action", "uuid": f"u{n}"})
    client.xreadgroup(keys.JOBS_GROUP, "monitor-1", {keys.JOBS: ">"}, count=1)


def samples(collector: FrontierCollector) -> dict[tuple[str, tuple[Any, ...]], float]:
    return {
        (sample.name, tuple(sorted(sample.labels.values()))): sample.value
        for family in collector.collect()
        for sample in family.samples
    }


def test_the_frontier_is_read_per_spider_with_the_largest_backlogs(redis_db: redis.Redis) -> None:
    _fill(redis_db)

    found = samples(FrontierCollector(redis_db, top_n=2, scan_limit=100, cache_seconds=0))

    assert found[("shoal_frontier_up", ())] == 1
    assert found[("shoal_queue_depth", ("link",))] == 9
    assert found[("shoal_queue_depth", ("wandering",))] == 4
    assert found[("shoal_inflight_requests", ("link",))] == 2
    assert found[("shoal_retrying_requests", ("link",))] == 1
    assert found[("shoal_inflight_requests", ("wandering",))] == 0
    assert found[("shoal_backlog_domains", ("link",))] == 3
    assert found[("shoal_queue_depth_truncated", ("link",))] == 0
    backlog = {labels: v for (name, labels), v in found.items() if name == "shoal_domain_backlog"}
    assert backlog == {("a.com", "link"): 5, ("b.com", "link"): 3, ("d.com", "wandering"): 4}  # top 2 per spider
    assert found[("shoal_live_crawls", ())] == 2
    assert found[("shoal_jobs_pending", ())] == 1
    assert found[("shoal_jobs_lag", ())] == 2
    used = redis_memory(redis_db).used  # the whole Redis (every test database) over the 16 requests held here
    assert used / 16 * 0.5 < found[("shoal_frontier_bytes_per_request", ())] <= used / 16 * 1.5


@pytest.mark.single_redis  # the scan limit is per shard: one shard makes the partial reading predictable
def test_a_scan_limit_reads_the_best_heads_and_says_it_is_partial(redis_db: redis.Redis) -> None:
    _fill(redis_db)

    found = samples(FrontierCollector(redis_db, top_n=5, scan_limit=2, cache_seconds=0))

    assert found[("shoal_queue_depth", ("link",))] == 1 + 3  # c.com and b.com: the two best heads
    assert found[("shoal_queue_depth_truncated", ("link",))] == 1
    assert found[("shoal_backlog_domains", ("link",))] == 3  # the domain count stays exact


def test_an_empty_frontier_exports_zeros_and_no_jobs(redis_db: redis.Redis) -> None:
    redis_db.sadd(keys.SPIDERS, "link")

    found = samples(FrontierCollector(redis_db, top_n=5, scan_limit=100, cache_seconds=0))

    assert found[("shoal_queue_depth", ("link",))] == 0
    assert not any(name == "shoal_domain_backlog" for name, _ in found)
    assert not any(name.startswith("shoal_jobs") for name, _ in found)  # no stream yet: no number invented


def test_a_reading_is_reused_until_the_cache_expires(redis_db: redis.Redis) -> None:
    _fill(redis_db)
    now = [100.0]
    collector = FrontierCollector(redis_db, top_n=5, scan_limit=100, cache_seconds=5, clock=lambda: now[0])
    assert samples(collector)[("shoal_queue_depth", ("wandering",))] == 4

    redis_db.delete(in_shard(redis_db, keys.queue("wandering", "d.com"), "d.com"))
    now[0] += 4
    assert samples(collector)[("shoal_queue_depth", ("wandering",))] == 4
    now[0] += 2
    assert samples(collector)[("shoal_queue_depth", ("wandering",))] == 0


def test_redis_down_exports_frontier_up_zero_only() -> None:
    dead = redis.Redis(port=free_port(), socket_connect_timeout=1, socket_timeout=1)

    found = samples(FrontierCollector(dead, top_n=5, scan_limit=100, cache_seconds=0))

    assert found == {("shoal_frontier_up", ()): 0}


def test_the_registered_collector_is_in_the_process_registry(redis_db: redis.Redis) -> None:
    _fill(redis_db)
    settings = Settings.load(environ={"SHOAL_METRICS_FRONTIER_CACHE": "0"})
    register_frontier_collector(settings, redis_db)
    register_frontier_collector(settings, redis_db)  # a second registration replaces the first
    try:
        assert REGISTRY.get_sample_value("shoal_queue_depth", {"spiderid": "link"}) == 9
    finally:
        unregister_frontier_collector()
    assert REGISTRY.get_sample_value("shoal_queue_depth", {"spiderid": "link"}) is None


# --- Kafka consumer lag ---------------------------------------------------------------------------


@pytest.fixture
def as_kafka_monitor() -> Iterator[str]:
    before = STATE.component
    configure_process(Settings.load(environ={}), "kafka-monitor")
    yield "kafka-monitor"
    configure_process(Settings.load(environ={}), before)


def _lag(topic: str) -> float | None:
    return REGISTRY.get_sample_value(
        "shoal_kafka_consumer_lag", {"component": "kafka-monitor", "topic": topic, "partition": "0"}
    )


@pytest.mark.timeout(90)
def test_consumer_lag_follows_what_was_read(
    kafka_bootstrap: str, unique_topic_prefix: str, as_kafka_monitor: str
) -> None:
    topic = f"{unique_topic_prefix}.incoming"
    settings = Settings.load(environ={"SHOAL_KAFKA_HOSTS": kafka_bootstrap})
    ensure_topics(settings, [topic], partitions=1)
    produce(kafka_bootstrap, topic, [{"n": n} for n in range(10)])
    consumer = kafka_consumer(settings, [topic], f"{unique_topic_prefix}-group", max_poll_records=4)
    read: list[Any] = []

    def poll_some() -> int:
        for records in consumer.poll(timeout_ms=200).values():
            read.extend(records)
        return len(read)

    try:
        wait_until(poll_some, 30, 0, "the consumer read nothing")
        assert len(read) == 4
        assert update_consumer_lag(consumer) == {(topic, 0): 6}
        assert _lag(topic) == 6

        wait_until(lambda: poll_some() == 10, 30, 0, "the consumer never read all 10")
        update_consumer_lag(consumer)
        assert _lag(topic) == 0

        consumer.unsubscribe()
        update_consumer_lag(consumer)
        assert _lag(topic) is None  # a partition given away is no longer this process's lag
    finally:
        consumer.close()
