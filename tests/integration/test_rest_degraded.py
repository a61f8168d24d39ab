"""A gateway whose Kafka or Redis is missing starts anyway, reports YELLOW or RED, and says why."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from rest import envelope
from tests.integration.test_rest_helpers import base_url, envelope_error, gateway_cluster
from tests.support.metrics import scrape, total
from tests.support.services import wait_until
from utils.services import free_port

pytestmark = [pytest.mark.integration, pytest.mark.timeout(90)]

FAST_PROBES = {"REST_HEARTBEAT_INTERVAL": 0.3, "WAIT_FOR_RESPONSE_TIME": 0.5}


def health_of(client: httpx.Client, expected: str) -> dict[str, Any] | None:
    try:
        health: dict[str, Any] = client.get("/").json()
    except httpx.HTTPError:
        return None
    return health if health["node_health"] == expected else None


def test_without_kafka_the_gateway_is_yellow_and_feed_is_a_500(services, tmp_path) -> None:
    metrics = free_port()
    with gateway_cluster(services, tmp_path, KAFKA_HOSTS=f"127.0.0.1:{free_port()}", METRICS_PORT=metrics,
                         **FAST_PROBES) as cluster:  # fmt: skip
        client = httpx.Client(base_url=base_url(cluster), timeout=30)
        health = wait_until(lambda: health_of(client, "YELLOW"), timeout=30)
        assert (health["kafka_connected"], health["redis_connected"]) == (False, True)
        samples = scrape(f"http://127.0.0.1:{metrics}/metrics")  # the metrics and `shoal status` name it too
        assert total(samples, "shoal_dependency_up", component="rest", dependency="kafka") == 0
        assert total(samples, "shoal_dependency_up", component="rest", dependency="redis") == 1
        assert total(samples, "shoal_healthy", component="rest") == 0
        response = client.post("/feed", json={"url": "http://127.0.0.250:9/", "appid": "app", "crawlid": "c"})
        assert (response.status_code, envelope_error(response)) == (500, {"message": envelope.NO_KAFKA})
        assert client.post("/poll", json={"poll_id": "x"}).status_code == 404  # Redis still serves


def test_without_redis_the_gateway_is_yellow_and_poll_is_a_500(services, tmp_path) -> None:
    with gateway_cluster(
        services, tmp_path, REDIS_PORT=free_port(), REDIS_SOCKET_TIMEOUT=1.0, **FAST_PROBES
    ) as cluster:
        client = httpx.Client(base_url=base_url(cluster), timeout=30)
        health = wait_until(lambda: health_of(client, "YELLOW"), timeout=30)
        assert (health["kafka_connected"], health["redis_connected"]) == (True, False)
        for response in (client.post("/poll", json={"poll_id": "x"}), client.get("/crawls/app/c1")):
            assert (response.status_code, envelope_error(response)) == (500, {"message": envelope.NO_REDIS})
        feed = client.post("/feed", json={"url": "http://127.0.0.250:9/", "appid": "app", "crawlid": "c"})
        assert feed.json() == envelope.body(None)  # Kafka still takes requests


def test_without_both_the_gateway_is_red(services, tmp_path) -> None:
    overrides = {"REDIS_PORT": free_port(), "KAFKA_HOSTS": f"127.0.0.1:{free_port()}", "REDIS_SOCKET_TIMEOUT": 1.0}
    with gateway_cluster(services, tmp_path, **overrides, **FAST_PROBES) as cluster:
        client = httpx.Client(base_url=base_url(cluster), timeout=30)
        health = wait_until(lambda: health_of(client, "RED"), timeout=30)
        assert (health["kafka_connected"], health["redis_connected"]) == (False, False)
        page = client.get("/dashboard")
        assert page.status_code == 200  # the page loads and shows the gateway's state
