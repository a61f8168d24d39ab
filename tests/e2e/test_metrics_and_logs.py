"""Issue 8, items 3 and 4: during a real crawl every component's /metrics moves, and every
component's log is JSON lines carrying Scrapy Cluster's event names (reference §11) for ELK.

Real `shoal kafka-monitor`, `shoal crawl` and `shoal redis-monitor` processes, each serving
/metrics on its own port (SHOAL_METRICS_PORT), against the demo site on loopback.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.cluster import Component, TestCluster
from tests.support.kafka import produce
from tests.support.metrics import events, json_lines, scrape, total
from tests.support.services import wait_until
from utils.demosite import SiteServer, generate_site
from utils.services import free_port

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(180)]

BASE_OCTET = 200  # 127.0.0.200-201: no other test serves there
MAXDEPTH = 3
HITS_PER_SECOND = 15  # per domain: the crawl lasts seconds, long enough to scrape it twice
THROTTLED = {"QUEUE_HITS": HITS_PER_SECOND, "QUEUE_WINDOW": 1, "QUEUE_MODERATED": False, "METRICS_FRONTIER_CACHE": 0.2}


@pytest.fixture
def site_server() -> Iterator[Any]:
    site = generate_site(hosts=2, pages_per_host=60, seed=11, base_ip_octet=BASE_OCTET, port=free_port())
    with SiteServer(site) as server:
        yield site, server


def start_with_metrics(cluster: TestCluster, name: str, *argv: str) -> tuple[Component, str]:
    """A component on its own metrics port (the cluster's settings are shared by all)."""
    port = free_port()
    env = {**cluster.env, "SHOAL_METRICS_PORT": str(port)}
    component = Component(name, list(argv), env, cluster.log_dir / f"{name}.log")
    cluster.components.append(component)  # stopped with the cluster
    return component, f"http://127.0.0.1:{port}/metrics"


def scraped(url: str) -> Any:
    try:
        return scrape(url)
    except OSError:  # not listening yet
        return None


@pytest.mark.parametrize("cluster", [THROTTLED], indirect=True)
def test_metrics_move_and_logs_carry_scrapy_cluster_events(
    cluster: TestCluster, site_server: Any, topic_reader: Any
) -> None:
    site, _server = site_server
    seeds = site.seed_urls()
    kafka_monitor, km_url = start_with_metrics(cluster, "kafka-monitor", "kafka-monitor")
    crawler, crawler_url = start_with_metrics(cluster, "crawler", "crawl", "--spider", "link")
    redis_monitor, rm_url = start_with_metrics(cluster, "redis-monitor", "redis-monitor")
    for url in (km_url, crawler_url, rm_url):
        wait_until(lambda url=url: scraped(url), timeout=60, message=f"{url} never answered")
    firehose = topic_reader("crawled_firehose")
    outbound = topic_reader("outbound_firehose")
    requests = [{"url": seed, "appid": "obs", "crawlid": "o1", "maxdepth": MAXDEPTH} for seed in seeds]
    produce(cluster.settings.get_list("KAFKA_HOSTS")[0], cluster.settings.incoming_topic, requests)

    # The kafka monitor counted exactly the requests fed.
    wait_until(lambda: total(scrape(km_url), "shoal_incoming_messages_total", kind="crawl") == len(seeds), 60,
               message="the kafka monitor never counted the crawl requests")  # fmt: skip
    # The crawler's pages-by-status counter rises between two scrapes taken during the crawl.
    first = wait_until(lambda: total(scrape(crawler_url), "shoal_pages_total", status="200"), 60)
    wait_until(lambda: total(scrape(crawler_url), "shoal_pages_total", status="200") > first, 30,
               message="the pages counter did not move during the crawl")  # fmt: skip
    # The redis monitor's frontier gauges show the backlog, then its drain.
    peak = wait_until(lambda: total(scrape(rm_url), "shoal_queue_depth", spiderid="link"), 30,
                      message="the redis monitor never showed a queue")  # fmt: skip
    assert peak > 0
    wait_until(lambda: total(scrape(rm_url), "shoal_crawls_ended_total", how="finished") == 1, 90,
               message="the crawl never finished")  # fmt: skip
    # A reading is cached METRICS_FRONTIER_CACHE seconds: one taken just before the end may still show work.
    wait_until(lambda: total(scrape(rm_url), "shoal_queue_depth", spiderid="link") == 0, 10,
               message="the queue gauge never returned to 0")  # fmt: skip

    info_uuid = uuid.uuid4().hex
    info = {"action": "info", "appid": "obs", "crawlid": "o1", "spiderid": "link", "uuid": info_uuid}
    produce(cluster.settings.get_list("KAFKA_HOSTS")[0], cluster.settings.incoming_topic, [info])
    outbound.wait_for(lambda got: any(m.get("uuid") == info_uuid for m in got), 30, "no info answer")
    pages = firehose.wait_for(lambda got: len(got) >= 10, 30)

    assert_crawler_metrics(scrape(crawler_url), len(pages))
    km = scrape(km_url)
    assert total(km, "shoal_incoming_messages_total", kind="action", outcome="queued") == 1
    assert total(km, "shoal_requests_enqueued_total", component="kafka-monitor") == len(seeds)
    assert total(km, "shoal_healthy", component="kafka-monitor") == 1
    lag_series = [labels for name, labels in km if name == "shoal_kafka_consumer_lag"]
    assert {dict(labels)["topic"] for labels in lag_series} == {cluster.settings.incoming_topic}
    wait_until(lambda: total(scrape(km_url), "shoal_kafka_consumer_lag") == 0, 10, message="the lag never fell to 0")
    wait_until(lambda: total(scrape(rm_url), "shoal_jobs_total", kind="info"), 10, message="no info job counted")
    assert total(scrape(rm_url), "shoal_jobs_total", kind="info", outcome="answered") == 1
    for url in (km_url, crawler_url, rm_url):  # every main loop turned within the last seconds
        assert time.time() - total(scrape(url), "shoal_loop_timestamp_seconds") < 30

    assert_kafka_monitor_log(json_lines(kafka_monitor.log_path), seeds)
    assert_crawler_log(json_lines(crawler.log_path))
    assert_redis_monitor_log(json_lines(redis_monitor.log_path), info_uuid)


def assert_crawler_metrics(samples: Any, firehose_pages: int) -> None:
    # robots.txt fetches count as pages too; every page on the firehose was counted
    assert total(samples, "shoal_pages_total") >= firehose_pages
    assert total(samples, "shoal_page_bytes_total") > 0
    assert total(samples, "shoal_download_duration_seconds_count") >= firehose_pages
    assert total(samples, "shoal_kafka_produced_total", outcome="sent") >= firehose_pages
    assert total(samples, "shoal_kafka_produced_total", outcome="failed") == 0
    assert total(samples, "shoal_requests_enqueued_total", component="crawler", spiderid="link") > 0
    assert total(samples, "shoal_requests_dropped_total", component="crawler") > 0  # the site links back
    assert total(samples, "shoal_dependency_up", dependency="redis") == 1
    assert total(samples, "shoal_healthy", component="crawler") == 1


def assert_kafka_monitor_log(entries: list[dict[str, Any]], seeds: list[str]) -> None:
    # At INFO one line per batch counts the crawl requests it added, per appid and crawlid (issue 37).
    added = events(entries, "Added crawl to Redis")
    assert sum(entry["count"] for entry in added) == len(seeds)
    for entry in added:
        assert (entry["parsed"], entry["valid"], entry["level"]) == (True, True, "INFO")
        assert (entry["appids"], entry["crawlids"]) == ({"obs": entry["count"]}, {"o1": entry["count"]})
    assert sum(entry["count"] for entry in events(entries, "Added action to Redis")) == 1


def assert_crawler_log(entries: list[dict[str, Any]]) -> None:
    sent = events(entries, "Sent page to Kafka")
    scraped_pages = events(entries, "Scraped page")
    assert sent
    assert scraped_pages
    assert all(entry["action"] == "ack" and entry["success"] is True for entry in sent)
    assert all(entry["action"] == "emit" and entry["crawlid"] == "o1" for entry in scraped_pages)
    assert {entry["url"] for entry in sent} == {entry["url"] for entry in scraped_pages}


def assert_redis_monitor_log(entries: list[dict[str, Any]], info_uuid: str) -> None:
    for event in ("Received info request", "Sent info to kafka"):
        found = [entry for entry in events(entries, event) if entry.get("uuid") == info_uuid]
        assert len(found) == 1, event
        assert (found[0]["appid"], found[0]["crawlid"]) == ("obs", "o1")
