"""Issue 33: the dashboard evaluates the alerts Kafka tells (rest/alerting.py) against a real broker,
with test-scaled thresholds: dead letters by their record timestamps, the consumer groups' lag growing,
each pending until its `for:` has passed, then firing; a quiet cluster shows none of them."""

from __future__ import annotations

import time
from typing import Any

import httpx
import pytest

from rest.alerting import DEAD_LETTERS, LAG_ALERTS
from tests.integration.test_rest_helpers import client_of, gateway_cluster, success_data
from tests.support.services import wait_until
from utils.config.clients import ensure_topics, kafka_producer
from utils.observability.metrics.group_lag import lag_groups

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
