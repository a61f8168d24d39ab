"""The failure paths reach the metrics and the logs (issue 8, items 3 and 4): a page that keeps
answering 503 is retried and dead-lettered by the crawler, and messages the kafka monitor cannot
use are counted as invalid and dead-lettered.

Real `shoal crawl` / `shoal kafka-monitor` processes, each serving /metrics on its own port.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.cluster import Component, TestCluster
from tests.support.kafka import produce
from tests.support.metrics import events, json_lines, scrape, total
from tests.support.services import wait_until
from utils.demosite import SiteServer, generate_site
from utils.services import free_port

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

BASE_OCTET = 202  # 127.0.0.202: no other test serves there
FAILING = "/page/3.html"
# 503 out of BLOCK_STATUSES: this test is about a transient status on RETRY_TIMES; a 503 the block
# detector sees is the ladder's, retried on its own budget (tests/e2e/test_pushback_sites.py).
FAST_RETRIES = {"RETRY_TIMES": 1, "RETRY_BACKOFF_BASE": 0.1, "RETRY_BACKOFF_MAX": 0.2, "BLOCK_STATUSES": [403, 429]}


@pytest.fixture
def failing_site() -> Iterator[Any]:
    site = generate_site(hosts=1, pages_per_host=5, seed=3, base_ip_octet=BASE_OCTET, port=free_port())
    with SiteServer(site, fail_paths={FAILING: 503}) as server:
        yield site, server


def start_with_metrics(cluster: TestCluster, name: str, *argv: str) -> tuple[Component, str]:
    port = free_port()
    component = Component(name, list(argv), {**cluster.env, "SHOAL_METRICS_PORT": str(port)},
                          cluster.log_dir / f"{name}.log")  # fmt: skip
    cluster.components.append(component)
    return component, f"http://127.0.0.1:{port}/metrics"


def scraped(url: str, name: str, **labels: str) -> float:
    try:
        return total(scrape(url), name, **labels)
    except OSError:  # not listening yet
        return 0.0


@pytest.mark.parametrize("cluster", [FAST_RETRIES], indirect=True)
def test_a_failing_page_is_counted_as_retried_then_dead(cluster: TestCluster, failing_site: Any) -> None:
    site, _server = failing_site
    host = site.hosts[0]
    start_with_metrics(cluster, "kafka-monitor", "kafka-monitor")
    crawler, url = start_with_metrics(cluster, "crawler", "crawl", "--spider", "link")
    requests = [{"url": f"http://{host}{path}", "appid": "fail", "crawlid": "f1"} for path in (FAILING, "/")]
    produce(cluster.settings.get_list("KAFKA_HOSTS")[0], cluster.settings.incoming_topic, requests)

    wait_until(lambda: scraped(url, "shoal_dead_letters_total", component="crawler", reason="503") == 1, 60,
               message="the 503 page was never dead-lettered")  # fmt: skip
    samples = scrape(url)
    assert total(samples, "shoal_retries_total", reason="503") == 1  # RETRY_TIMES = 1
    assert total(samples, "shoal_pages_total", status="503") == 2  # the try and its retry
    assert total(samples, "shoal_pages_total", status="200") >= 1
    assert total(samples, "shoal_kafka_produced_total", topic=cluster.settings.topic("dead_letter")) == 1
    entries = json_lines(crawler.log_path)
    retries = events(entries, "Scraper Retry")
    assert [(e["retry_reason"], e["attempt"], e["crawlid"]) for e in retries] == [("503", 1, "f1")]
    failed = [e for e in events(entries, "Sent page to Kafka") if e["url"].endswith(FAILING)]
    assert [(e["action"], e["success"]) for e in failed] == [("ack", False)]


def test_unusable_messages_are_counted_invalid_and_dead_lettered(cluster: TestCluster) -> None:
    monitor, url = start_with_metrics(cluster, "kafka-monitor", "kafka-monitor")
    wait_until(lambda: scraped(url, "shoal_loop_timestamp_seconds"), 60, message="no kafka monitor loop")
    bootstrap = cluster.settings.get_list("KAFKA_HOSTS")[0]
    produce(bootstrap, cluster.settings.incoming_topic, [b"{not json", {"appid": "x"}, {"url": "http://127.0.0.202/",
            "appid": "okapp", "crawlid": "k1"}])  # fmt: skip

    dead_letter_topic = cluster.settings.topic("dead_letter")

    def settled() -> bool:  # invalid messages count when read, their dead letters when their batch ends
        samples = scrape(url)
        return total(samples, "shoal_incoming_messages_total") == 3 and \
            total(samples, "shoal_kafka_produced_total", topic=dead_letter_topic) == 2  # fmt: skip

    wait_until(settled, 60, message="not every message counted")
    samples = scrape(url)
    assert total(samples, "shoal_incoming_messages_total", kind="unknown", outcome="invalid") == 2
    assert total(samples, "shoal_incoming_messages_total", kind="crawl", outcome="queued") == 1
    assert total(samples, "shoal_dead_letters_total", component="kafka-monitor", reason="invalid") == 2
    assert total(samples, "shoal_kafka_produced_total", topic=cluster.settings.topic("dead_letter")) == 2
    assert total(samples, "shoal_batch_duration_seconds_count") >= 1
    entries = json_lines(monitor.log_path)
    assert [e["parsed"] for e in events(entries, "Unparseable JSON Received")] == [False]
    rejected = events(entries, "Did not find schema to validate request")
    assert [(e["parsed"], e["valid"]) for e in rejected] == [(True, False)]
