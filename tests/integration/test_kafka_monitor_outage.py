"""Redis goes away under a running kafka monitor: nothing is committed, lost or reordered.

The monitor runs against a Redis of its own (the session's is shared), which is stopped while a
batch is in hand and started again on the same port and data directory.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path

import pytest
from confluent_kafka import Producer

from kafka_monitor.monitor import KafkaMonitor
from tests.support.cluster import TestCluster
from tests.support.kafka import GroupOffsets, TopicReader
from tests.support.services import wait_until
from utils.config.clients import ensure_topics, redis_client
from utils.frontier import keys, stored_requests
from utils.services import start_local_services

pytestmark = pytest.mark.integration


def produce_in_order(bootstrap: str, topic: str, messages: list[dict]) -> None:
    """All to partition 0, so their order is the topic's order."""
    import json

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for message in messages:
        producer.produce(topic, json.dumps(message), partition=0)
    assert producer.flush(30) == 0


@pytest.mark.timeout(120)
@pytest.mark.single_redis  # a redis-server of its own, stopped and started
def test_redis_outage_holds_the_batch_and_resumes_without_loss_or_reordering(
    cluster: TestCluster, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    bootstrap = cluster.settings.get_list("KAFKA_HOSTS")[0]
    group = cluster.settings.get_str("KAFKA_GROUP")
    crawls = [{"url": f"http://127.0.41.1/{i}", "appid": "testapp", "crawlid": "outage", "uuid": f"u{i}"}
              for i in range(8)]  # fmt: skip
    caplog.set_level(logging.INFO, logger="kafka_monitor")
    with start_local_services(tmp_path / "own-redis", services=["redis"]) as own:
        settings = cluster.settings.copy_with(
            REDIS_HOST=own.redis.host, REDIS_PORT=own.redis.port, REDIS_DB=0,
            REDIS_SOCKET_TIMEOUT=1.0, KAFKA_MONITOR_RETRY_MAX_BACKOFF=0.4,
        )  # fmt: skip
        ensure_topics(settings, [settings.incoming_topic])
        outbound = TopicReader(bootstrap, settings.topic("outbound_firehose"))
        km = KafkaMonitor.from_settings(settings)
        committed = GroupOffsets(bootstrap, group, settings.incoming_topic)
        try:
            produce_in_order(bootstrap, settings.incoming_topic, crawls[:3])
            wait_until(lambda: km.run_once(), timeout=30, interval=0)
            wait_until(lambda: committed.total() == 3, timeout=10)

            own.redis.stop()
            produce_in_order(bootstrap, settings.incoming_topic, crawls[3:])
            worker = threading.Thread(target=lambda: wait_until(lambda: km.run_once(), timeout=60, interval=0))
            worker.start()
            wait_until(lambda: _logged(caplog, "Redis unavailable; batch kept, retrying") >= 2, timeout=30)
            assert committed.total() == 3  # the batch in hand is not committed
            assert km.consumer.paused()  # and nothing more is read meanwhile

            own.redis.start()
            own.redis.wait_ready(30)
            worker.join(60)
            assert not worker.is_alive()
            wait_until(lambda: committed.total() == 8, timeout=10)
            assert not km.consumer.paused()
            assert _logged(caplog, "Redis is back; resuming") == 1

            r = redis_client(settings)
            members = r.zrange(keys.queue("link", "127.0.41.1"), 0, -1)
            urls = [stored_requests.read(r, "link", "127.0.41.1", m)["url"] for m in members]
            assert urls == [c["url"] for c in crawls]  # all of them, once each, in the topic's order
            acks = outbound.wait_for(lambda got: len(got) >= 8, timeout=15)
            assert sorted(a["uuid"] for a in acks) == sorted(c["uuid"] for c in crawls)
        finally:
            km.close()
            outbound.close()
            committed.close()


def _logged(caplog: pytest.LogCaptureFixture, message: str) -> int:
    return sum(1 for record in caplog.records if record.getMessage() == message)


@pytest.mark.single_redis  # a redis-server of its own, stopped and started
def test_no_batch_is_written_past_one_that_failed(cluster: TestCluster, tmp_path: Path) -> None:
    """Batch A fails to stream, Redis comes back, batch B is sent: B must wait for A's rewrite, or
    the offset check would take A's (lower) offsets for a replay and drop them."""
    from kafka_monitor.batch import Batch
    from kafka_monitor.dispatch import Dispatcher
    from kafka_monitor.writer import RETRIABLE, BatchWriter
    from tests.unit.test_kafka_monitor_dispatch import Record
    from utils.config.plugins import load_plugins
    from utils.frontier import Frontier

    with start_local_services(tmp_path / "own-redis", services=["redis"]) as own:
        settings = cluster.settings.copy_with(REDIS_HOST=own.redis.host, REDIS_PORT=own.redis.port, REDIS_DB=0)
        client = redis_client(settings)
        writer = BatchWriter(client, Frontier.from_settings(settings, client))
        dispatcher = Dispatcher(load_plugins(settings.get_dict("KAFKA_MONITOR_PLUGINS"), settings))

        def batch(offsets: range) -> Batch:
            values = [b'{"url": "http://127.0.41.2/%d", "appid": "testapp", "crawlid": "o"}' % i for i in offsets]
            return dispatcher.process([Record("in", 0, i, v) for i, v in zip(offsets, values, strict=True)], Batch())

        first, second = batch(range(0, 5)), batch(range(5, 10))
        own.redis.stop()
        group_a = writer.begin()
        writer.send(group_a, first.requests, first.commands)  # Redis is gone: A fails
        own.redis.start()
        own.redis.wait_ready(30)
        group_b = writer.begin()
        writer.send(group_b, second.requests, second.commands)  # must not reach Redis before A
        for group, held in ((group_a, first), (group_b, second)):
            with pytest.raises(RETRIABLE):
                writer.finish(group)
            assert writer.write_all(held.requests, held.commands).count("queued") == 5
        writer.close()
        assert client.zcard(keys.queue("link", "127.0.41.2")) == 10
