"""The redis monitor rides out a Redis outage and a stalled broker: it keeps running, loses no job,
and answers each once. Each test starts a private Redis or broker, so stopping it disturbs no one."""

from __future__ import annotations

import logging
import threading
from pathlib import Path

import pytest

from redis_monitor.monitor import RedisMonitor
from tests.integration.test_redis_monitor_helpers import add_jobs, new_uuid
from tests.support.cluster import TestCluster
from tests.support.kafka import TopicReader
from tests.support.services import wait_until
from utils.config.clients import redis_client
from utils.frontier import keys
from utils.services import start_local_services

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


@pytest.mark.single_redis  # a redis-server of its own, stopped and started
def test_jobs_added_around_a_redis_restart_are_all_answered(
    cluster: TestCluster, tmp_path: Path, topic_reader, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="redis_monitor")
    private = start_local_services(tmp_path / "private", services=["redis"])  # ours alone to stop
    try:
        settings = cluster.settings.copy_with(REDIS_PORT=private.redis.port, REDIS_DB=0, REDIS_SOCKET_TIMEOUT=1.0)
        client = redis_client(settings, decode=True)
        outbound = topic_reader("outbound_firehose")
        monitor = RedisMonitor.from_settings(settings)
        stop = threading.Event()
        loop = threading.Thread(target=monitor.run, args=(stop,), daemon=True)
        loop.start()
        jobs = [{"action": "info", "appid": "app", "spiderid": "link", "uuid": new_uuid()} for _ in range(3)]
        add_jobs(client, "action", jobs[:1])
        outbound.wait_for(lambda got: len(got) == 1, timeout=30)

        add_jobs(client, "action", jobs[1:2])  # whether it is read before the outage or after
        private.redis.stop()  # SIGTERM: Redis writes its append-only file, as on a clean restart
        wait_until(lambda: any(r.getMessage() == "Redis unavailable; retrying" for r in caplog.records), 30)
        assert loop.is_alive()
        private.redis.start()
        private.redis.wait_ready(30)
        add_jobs(client, "action", jobs[2:])
        answers = outbound.wait_for(lambda got: len({m["uuid"] for m in got}) == 3, timeout=60)
        stop.set()
        loop.join(30)
        assert sorted({m["uuid"] for m in answers}) == sorted(j["uuid"] for j in jobs)
        assert client.xlen(keys.JOBS) == 0
    finally:
        private.stop_all()


def test_answers_produced_while_the_broker_stalls_arrive_once_it_is_back(
    cluster: TestCluster, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="redis_monitor")
    private = start_local_services(tmp_path / "private", services=["kafka"])  # ours alone to pause
    try:
        settings = cluster.settings.copy_with(KAFKA_HOSTS=[private.broker.address])
        client = redis_client(settings, decode=True)
        monitor = RedisMonitor.from_settings(settings)
        outbound = TopicReader(private.broker.address, settings.topic("outbound_firehose"))
        stop = threading.Event()
        loop = threading.Thread(target=monitor.run, args=(stop,), daemon=True)
        loop.start()
        jobs = [{"action": "info", "appid": "app", "spiderid": "link", "uuid": new_uuid()} for _ in range(3)]
        add_jobs(client, "action", jobs[:1])
        outbound.wait_for(lambda got: len(got) == 1, timeout=30)

        private.broker.pause()  # SIGSTOP: connections stay open, nothing answers
        add_jobs(client, "action", jobs[1:])
        sent = {j["uuid"] for j in jobs[1:]}
        wait_until(lambda: sent <= {getattr(r, "uuid", None) for r in caplog.records
                                    if r.getMessage() == "Sent info to kafka"}, 30)  # fmt: skip
        assert client.xlen(keys.JOBS) == 2  # handled, but not acknowledged before Kafka confirms
        private.broker.resume()
        answers = outbound.wait_for(lambda got: len({m["uuid"] for m in got}) == 3, timeout=60)
        wait_until(lambda: client.xlen(keys.JOBS) == 0, 30)
        outbound.poll(1.0)
        stop.set()
        loop.join(30)
        outbound.close()
        assert sorted(m["uuid"] for m in answers) == sorted(j["uuid"] for j in jobs)  # each once
    finally:
        private.stop_all()
