"""A full Redis (maxmemory, noeviction): crawl requests are answered "frontier full", never "queued".

The monitor runs against a Redis of its own whose maxmemory the test lowers below what it holds, with
the memory backpressure mark out of the way, so the writes themselves are refused.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kafka_monitor.monitor import KafkaMonitor
from tests.integration.test_kafka_monitor_outage import produce_in_order
from tests.support.cluster import TestCluster
from tests.support.kafka import GroupOffsets, TopicReader
from tests.support.services import wait_until
from utils.config.clients import ensure_topics, redis_client
from utils.frontier import keys
from utils.services import start_local_services

pytestmark = pytest.mark.integration


@pytest.mark.timeout(120)
@pytest.mark.single_redis  # a redis-server of its own, made full
def test_a_full_redis_answers_frontier_full_and_dead_letters_instead_of_queued(
    cluster: TestCluster, tmp_path: Path
) -> None:
    bootstrap = cluster.settings.get_list("KAFKA_HOSTS")[0]
    group = cluster.settings.get_str("KAFKA_GROUP")
    crawls = [{"url": f"http://127.0.39.1/{i}", "appid": "testapp", "crawlid": "full", "uuid": f"f{i}"}
              for i in range(5)]  # fmt: skip
    with start_local_services(tmp_path / "own-redis", services=["redis"]) as own:
        settings = cluster.settings.copy_with(
            REDIS_HOST=own.redis.host, REDIS_PORT=own.redis.port, REDIS_DB=0,
            KAFKA_MONITOR_MEMORY_HIGH_WATER=10**15,  # backpressure never pauses: the writes meet the limit
        )  # fmt: skip
        ensure_topics(settings, [settings.incoming_topic, settings.topic("dead_letter")])
        outbound = TopicReader(bootstrap, settings.topic("outbound_firehose"))
        dead = TopicReader(bootstrap, settings.topic("dead_letter"))
        r = redis_client(settings)
        km = KafkaMonitor.from_settings(settings)
        committed = GroupOffsets(bootstrap, group, settings.incoming_topic)
        try:
            produce_in_order(bootstrap, settings.incoming_topic, crawls[:1])
            wait_until(lambda: km.run_once() and committed.total() == 1, timeout=30)
            assert r.config_get("maxmemory-policy")["maxmemory-policy"] == "noeviction"
            r.config_set("maxmemory", 1)  # full: every write refused

            produce_in_order(bootstrap, settings.incoming_topic, crawls[1:4])
            wait_until(lambda: km.run_once() is not None and committed.total() == 4, timeout=30)
            r.config_set("maxmemory", 0)
            produce_in_order(bootstrap, settings.incoming_topic, crawls[4:])
            wait_until(lambda: km.run_once() is not None and committed.total() == 5, timeout=30)

            answers = {a.get("uuid"): a for a in outbound.wait_for(lambda got: len(got) >= 5, timeout=15)}
            assert [answers[f"f{i}"].get("status") for i in (0, 4)] == ["queued", "queued"]
            for i in (1, 2, 3):
                assert answers[f"f{i}"]["action"] == "error"
                assert answers[f"f{i}"]["error"]["message"] == "frontier full"
                assert "queued" not in str(answers[f"f{i}"])
            letters = dead.wait_for(lambda got: len(got) >= 3, timeout=15)
            assert sorted(letter["data"]["uuid"] for letter in letters) == ["f1", "f2", "f3"]
            assert r.zcard(keys.queue("link", "127.0.39.1")) == 2  # the two that fit, nothing of the others
        finally:
            km.close()
            outbound.close()
            dead.close()
            committed.close()
