"""Issue 33: the dashboard evaluates the alerts Kafka tells (rest/alerting.py) against a real broker,
with test-scaled thresholds: dead letters by their record timestamps, the consumer groups' lag growing,
each pending until its `for:` has passed, then firing; a quiet cluster shows none of them."""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from rest.alerting import DEAD_LETTERS, LAG_ALERTS, KafkaFigures
from tests.integration.test_rest_helpers import client_of, gateway_cluster, success_data
from tests.support.services import SERVICE_START_TIMEOUT, wait_until
from utils.config.clients import ensure_topics, kafka_producer
from utils.config.settings import Settings
from utils.observability.metrics.group_lag import lag_groups
from utils.services import LocalService
from utils.services.argv import HOST
from utils.services.kafka import kafka_argv
from utils.services.local import PROBES
from utils.services.process import free_ports

pytestmark = [pytest.mark.integration, pytest.mark.timeout(90)]

SCALED = {  # 10 dead letters in 10 s is 1/s > 0.5/s; lag over 5 and growing; `for:` 2 s and 1 s
    "ALERT_DEAD_LETTER_RATE": 0.5, "ALERT_DEAD_LETTER_WINDOW": 10, "ALERT_DEAD_LETTER_FOR": 2,
    "ALERT_LAG_MESSAGES": 5, "ALERT_LAG_WINDOW": 60, "ALERT_LAG_FOR": 1, "METRICS_FRONTIER_CACHE": 0,
}
KAFKA_ALERTS = {DEAD_LETTERS, *LAG_ALERTS.values()}


def kafka_states(http: httpx.Client) -> dict[str, str]:
    conditions = success_data(http.get("/dashboard/data"))["pushback"]["conditions"]
    return {c["alert"]: c["state"] for c in conditions if c["alert"] in KAFKA_ALERTS}


def produce(producer: Any, topics: list[str], n: int, timestamp_ms: int | None = None) -> None:
    for i in range(n):
        for topic in topics:
            producer.send(topic, key=str(i).encode(), value=b"{}", timestamp_ms=timestamp_ms)
    producer.flush()


def test_dead_letters_and_growing_lags_go_pending_then_firing(services, tmp_path) -> None:
    with gateway_cluster(services, tmp_path, **SCALED) as cluster:
        settings = cluster.settings
        groups = lag_groups(settings)
        lagging = [groups["kafka-monitor"][1][0], groups["sink"][1][0]]  # no consumer of either group runs
        ensure_topics(settings, [settings.topic("dead_letter"), *lagging], partitions=2)
        http = client_of(cluster)
        producer = kafka_producer(settings)
        try:
            wait_until(lambda: lags_readable(settings), timeout=30, interval=0.5,
                       message="the broker never answered the groups' offsets")  # fmt: skip
            assert kafka_states(http) == kafka_states(http) == {}  # a quiet cluster
            produce(producer, [settings.topic("dead_letter")], 30, timestamp_ms=int(time.time() * 1000) - 60_000)
            assert kafka_states(http) == {}  # dead letters of a minute ago are out of the 10 s window

            produce(producer, [settings.topic("dead_letter")], 10)
            produce(producer, lagging, 10)
            states = kafka_states(http)  # lags read as 0 before (if the topics were there yet) make 10 a rise
            assert states.pop(DEAD_LETTERS) == "pending"
            assert set(states.values()) <= {"pending"}, states  # nothing fires before its `for:`
            produce(producer, lagging, 10)
            pending = dict.fromkeys(LAG_ALERTS.values(), "pending")
            assert kafka_states(http) == {DEAD_LETTERS: "pending", **pending}
            firing = {alert: "firing" for alert in KAFKA_ALERTS}
            wait_until(lambda: kafka_states(http) == firing, timeout=8, interval=0.3,
                       message="the dead letters and the lags never went from pending to firing")  # fmt: skip
        finally:
            producer.close()



def lags_readable(settings: Settings) -> bool:
    """Whether the broker answers both groups' offsets (their coordinator is loaded)."""
    figures = KafkaFigures(settings, window=10, cache_seconds=0)
    try:
        return set(figures.get()[1]) == set(LAG_ALERTS)
    finally:
        figures.close()


@contextlib.contextmanager
def broker_without_coordinator(run_dir: Path) -> Iterator[str]:
    """A broker whose group coordinator never comes: its offsets topic asks for 3 replicas of its
    one broker, so every group's offsets are refused (as while a coordinator loads), ever."""
    port, controller = free_ports(2)
    data = run_dir / "kafka"
    argv = kafka_argv(HOST, port, data, controller, extra={"offsets.topic.replication.factor": "3"})
    broker = LocalService(name="kafka", argv=argv, port=port, log_path=run_dir / "kafka.log", data_dir=data,
                          probe=PROBES["kafka"], host=HOST, pid_path=run_dir / "kafka.pid")  # fmt: skip
    broker.start()
    try:
        broker.wait_ready(SERVICE_START_TIMEOUT)
        yield broker.address
    finally:
        broker.stop()


def test_groups_kafka_refuses_leave_out_their_lags_and_nothing_else(tmp_path: Path, caplog) -> None:
    with broker_without_coordinator(tmp_path) as address:
        settings = Settings.load(environ={}, overrides={"KAFKA_HOSTS": [address]})
        read = [topic for _, topics in lag_groups(settings).values() for topic in topics]
        ensure_topics(settings, [settings.topic("dead_letter"), *read])
        producer = kafka_producer(settings)
        try:
            produce(producer, [settings.topic("dead_letter")], 3)
        finally:
            producer.close()
        figures = KafkaFigures(settings, window=60, cache_seconds=0)
        try:
            with caplog.at_level(logging.WARNING, logger="rest.alerting"):
                assert figures.get() == (3, {})  # the dead letters, no lag
        finally:
            figures.close()
    failed = [r for r in caplog.records if r.getMessage() == "Alert figures from Kafka failed"]
    assert sorted(getattr(r, "figure", None) for r in failed) == ["the kafka-monitor lag", "the sink lag"]
