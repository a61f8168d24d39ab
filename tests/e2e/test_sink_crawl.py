"""A crawl of the generated site through the whole cluster into PostgreSQL: every page lands once, with
its crawl-log line, and crawling the unchanged site again changes no page's content."""

from __future__ import annotations

import pytest

from tests.support.cluster import TestCluster
from tests.support.kafka import produce
from tests.support.postgres import Postgres
from tests.support.services import wait_until
from tests.support.sink import count, rows, sink_settings, wait_count
from utils.demosite import SiteServer, generate_site
from utils.services import free_port

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]

CONTENT = ("status_code", "content_hash", "headers", "links", "body", "first_seen", "last_changed")


@pytest.fixture
def site_server():
    site = generate_site(hosts=2, pages_per_host=80, seed=19, base_ip_octet=19, port=free_port())
    with SiteServer(site) as server:
        yield site, server


def _crawl(cluster: TestCluster, seeds: list[str], crawlid: str) -> None:
    requests = [{"url": seed, "appid": "sinkapp", "crawlid": crawlid, "maxdepth": 10, "deny_extensions": []}
                for seed in seeds]  # fmt: skip
    produce(cluster.settings.get_list("KAFKA_HOSTS")[0], cluster.settings.incoming_topic, requests)


@pytest.mark.parametrize("cluster", [{"QUEUE_HITS": 1000, "QUEUE_WINDOW": 1, "QUEUE_MODERATED": False}], indirect=True)
def test_every_page_of_a_crawl_lands_once_and_a_recrawl_changes_nothing(
    cluster: TestCluster, postgres: Postgres, pg_schema: str, site_server
) -> None:
    site, _server = site_server
    seeds = site.seed_urls()
    expected = site.reachable(seeds, 10, obey_robots=True)
    sink_settings(cluster, postgres, pg_schema)
    cluster.start("kafka-monitor")
    cluster.start("crawl", "--spider", "link")
    cluster.start("sink")
    cluster.start("sink")  # two sinks in one group share the partitions

    _crawl(cluster, seeds, "first")
    wait_count(postgres, pg_schema, "pages", len(expected), timeout=180)
    wait_count(postgres, pg_schema, "crawl_log", len(expected))
    first = {row["url"]: row for row in rows(postgres, pg_schema, "pages", "url")}
    assert set(first) == set(expected)
    for url, row in first.items():
        source = site.pages[url]
        assert row["status_code"] == source.status
        if not source.content_type.startswith(("text/", "application/xml")):
            continue
        assert row["body"] == source.body.decode("utf-8"), url
    log = rows(postgres, pg_schema, "crawl_log", "id")
    assert {row["url"] for row in log} == set(expected)
    assert all(row["worker"] and row["request_id"] and row["crawlid"] == "first" for row in log)

    _crawl(cluster, seeds, "second")
    wait_until(lambda: count(postgres, pg_schema, "pages", "crawlid = 'second'") == len(expected), 180)
    wait_count(postgres, pg_schema, "crawl_log", 2 * len(expected))
    second = {row["url"]: row for row in rows(postgres, pg_schema, "pages", "url")}
    assert set(second) == set(expected)
    for url in expected:
        assert {k: second[url][k] for k in CONTENT} == {k: first[url][k] for k in CONTENT}, url
        assert second[url]["fetched_at"] > first[url]["fetched_at"]
