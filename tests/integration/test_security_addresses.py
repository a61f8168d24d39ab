"""Issue 30 through the real kafka monitor and REST gateway: a URL is queued under the host Scrapy
fetches, and a crawl may name only a proxy the operator allows, at an address the policy allows."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from kafka_monitor.monitor import KafkaMonitor
from tests.integration.test_rest_helpers import client_of, envelope_error, gateway_cluster
from tests.support.cluster import TestCluster
from tests.support.frontier_keys import in_shard
from tests.support.kafka import produce
from utils.config.clients import redis_client
from utils.frontier import keys

pytestmark = pytest.mark.integration

BASE = {"appid": "addrapp", "crawlid": "addr"}
LISTED_PROXY = "http://127.0.0.1:3128"

REFUSED = [
    ({"url": "http://example.com/", "proxy": "http://169.254.169.254:80"}, "proxy: refused"),  # not listed
    ({"url": "http://example.com/", "proxy": "http://proxy.example.com:3128"}, "proxy: refused"),
    ({"url": "http://169.254.169.254\\@allowed.org/"}, "url: refused"),  # Scrapy fetches 169.254.169.254
    ({"url": "http://１６９.２５４.１６９.２５４/"}, "url: refused"),
    ({"url": "http://169.254.169.254./"}, "url: refused"),
    ({"url": "http://[64:ff9b::a9fe:a9fe]/"}, "url: refused"),
    ({"url": "http://100.100.100.200/"}, "url: refused"),
]


@pytest.fixture
def monitor(cluster: TestCluster) -> Iterator[KafkaMonitor]:
    km = KafkaMonitor.from_settings(cluster.settings.copy_with(PROXY_LIST=LISTED_PROXY))
    yield km
    km.close()


def drain(monitor: KafkaMonitor, expected: int, timeout: float = 30) -> int:
    handled, deadline = 0, time.monotonic() + timeout
    while handled < expected and time.monotonic() < deadline:
        handled += monitor.run_once()
    return handled


def queued(cluster: TestCluster, domain: str) -> int:
    r = redis_client(cluster.settings)
    return int(r.zcard(in_shard(r, keys.queue("link", domain), domain)))


def test_the_kafka_monitor_refuses_internal_urls_and_unlisted_proxies_and_queues_what_scrapy_fetches(
    cluster: TestCluster, monitor: KafkaMonitor, topic_reader
) -> None:
    outbound = topic_reader("outbound_firehose")
    messages: list[Any] = [{**BASE, **fields, "uuid": f"bad-{i}"} for i, (fields, _) in enumerate(REFUSED)]
    messages += [
        {**BASE, "uuid": "backslash", "url": "http://ebay.com\\@allowed.org/"},  # fetched from ebay.com
        {**BASE, "uuid": "wide", "url": "http://ｅｂａｙ.com/wide"},
        {**BASE, "uuid": "listed", "url": "http://example.com/p", "proxy": "http://u:p@2130706433:3128"},
    ]
    produce(cluster.settings.get_list("KAFKA_HOSTS")[0], cluster.settings.incoming_topic, messages)
    assert drain(monitor, len(messages)) == len(messages)
    answers = outbound.wait_for(lambda got: len(got) >= len(messages), 20)
    by_uuid = {a["uuid"]: a for a in answers}
    for i, (_, cause) in enumerate(REFUSED):
        assert by_uuid[f"bad-{i}"]["action"] == "error"
        assert cause in by_uuid[f"bad-{i}"]["error"]["cause"], by_uuid[f"bad-{i}"]
    assert {by_uuid[u]["action"] for u in ("backslash", "wide", "listed")} == {"crawl"}
    assert queued(cluster, "ebay.com") == 2  # not under allowed.org, where its throttle and blacklist are
    assert queued(cluster, "allowed.org") == 0
    assert queued(cluster, "example.com") == 1  # the listed proxy, spelt as a number with credentials


@pytest.fixture(scope="module")
def gateway(services, tmp_path_factory) -> Iterator[httpx.Client]:
    with gateway_cluster(services, tmp_path_factory.mktemp("rest-addr"), PROXY_LIST=LISTED_PROXY) as cluster:
        client = client_of(cluster)
        yield client
        client.close()


@pytest.mark.parametrize(("fields", "cause"), REFUSED)
def test_the_gateway_refuses_them_before_kafka(gateway: httpx.Client, fields: dict[str, Any], cause: str) -> None:
    response = gateway.post("/feed", json={**BASE, **fields})
    assert response.status_code == 400
    assert cause in envelope_error(response)["cause"]


def test_the_gateway_accepts_a_listed_proxy(gateway: httpx.Client) -> None:
    response = gateway.post("/feed", json={**BASE, "url": "http://example.com/", "proxy": "http://127.0.0.1:3128"})
    assert response.status_code == 200, response.text
