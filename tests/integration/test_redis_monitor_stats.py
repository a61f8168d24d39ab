"""Stats answers of every kind in Scrapy Cluster's shapes, and the periodic stats dumps."""

from __future__ import annotations

import logging

import pytest

from tests.integration.test_redis_monitor_helpers import add_jobs, answered, drive, frontier_of, running_monitor, seed
from tests.support.cluster import TestCluster
from utils.frontier import keys
from utils.observability.stats import StatsCollector, StatsConfig, beat

pytestmark = pytest.mark.integration

WINDOWS = ["900", "3600", "21600", "43200", "86400", "604800", "lifetime"]
KINDS = ["kafka-monitor", "redis-monitor", "crawler", "spider", "machine", "queue", "rest", "all"]


def every_window(n: int) -> dict[str, int]:
    return dict.fromkeys(WINDOWS, n)


@pytest.fixture
def filled(cluster: TestCluster):
    """Counters and heartbeats as the other components write them, and a small backlog."""
    frontier = frontier_of(cluster)
    r = frontier.client
    seed(frontier, "app", "c1", [("http://a.com/1", "a.com", 1), ("http://a.com/2", "a.com", 1),
                                 ("http://b.com/1", "b.com", 1)])  # fmt: skip
    collector = StatsCollector(r, StatsConfig.from_settings(cluster.settings))
    for base, n in {"stats:kafka-monitor:total": 5, "stats:kafka-monitor:fail": 1,
                    "stats:kafka-monitor:CrawlHandler": 4, "stats:crawler:host1:link:200": 10,
                    "stats:crawler:host2:link:200": 5, "stats:crawler:host1:link:504": 2}.items():  # fmt: skip
        collector.incr(base, n)
    collector.flush()
    beat(r, "kafka-monitor", "km-host", "km1", 60, keys.heartbeat("kafka-monitor", "km-host", "km1"))
    beat(r, "rest", "rest-host", "rest1", 60, keys.heartbeat("rest", "rest-host", "rest1"))
    for host, process in (("host1", "p1"), ("host2", "p2")):
        beat(r, "crawler", host, f"link:{process}", 60, keys.crawler_heartbeat(host, "link", process))
    return r


def test_every_stats_kind_is_answered_in_scrapy_clusters_shape(cluster: TestCluster, filled, topic_reader) -> None:
    outbound = topic_reader("outbound_firehose")
    requests = {kind: {"uuid": f"stats-{kind}", "appid": "testapp", "stats": kind} for kind in KINDS}
    with running_monitor(cluster) as monitor:
        monitor.run_once()  # its own heartbeat
        add_jobs(filled, "stats", requests.values())
        got = drive(monitor, answered(outbound, [r["uuid"] for r in requests.values()]))
    answers = {kind: got[f"stats-{kind}"] for kind in KINDS}
    common = {"stats", "appid", "uuid", "server_time"}
    for kind, answer in answers.items():
        assert (answer["stats"], answer["appid"], answer["uuid"]) == (kind, "testapp", f"stats-{kind}")
        assert isinstance(answer["server_time"], int)

    km = answers["kafka-monitor"]
    assert set(km) == common | {"total", "fail", "plugins", "nodes"}
    assert (km["total"], km["fail"]) == (every_window(5), every_window(1))
    assert km["plugins"] == {"CrawlHandler": every_window(4)}
    assert km["nodes"] == {"km-host": ["km1"]}
    rm = answers["redis-monitor"]
    assert set(rm) == common | {"total", "fail", "plugins", "nodes"}
    assert list(rm["nodes"].values()) == [[monitor.context.process_id]]

    spiders = {"link": {"count": 2, "200": every_window(15), "504": every_window(2)},
               "unique_spider_count": 1, "total_spider_count": 2}  # fmt: skip
    machines = {"host1": {"200": every_window(10), "504": every_window(2)}, "host2": {"200": every_window(5)},
                "count": 2}  # fmt: skip
    queues = {"queue_link": {"spider_backlog": 3, "num_domains": 2, "domains": [
        {"domain": "a.com", "backlog": 2}, {"domain": "b.com", "backlog": 1}]}, "total_backlog": 3}  # fmt: skip
    assert answers["spider"] == {**_common(answers["spider"]), "spiders": spiders}
    assert answers["machine"] == {**_common(answers["machine"]), "machines": machines}
    assert answers["queue"] == {**_common(answers["queue"]), "queues": queues}
    crawler = {"spiders": spiders, "machines": machines, "queue": queues}  # "queue": Scrapy Cluster's code
    assert answers["crawler"] == {**_common(answers["crawler"]), **crawler}
    assert answers["rest"] == {**_common(answers["rest"]), "nodes": {"rest-host": ["rest1"]}}
    everything = answers["all"]
    assert set(everything) == common | {"kafka-monitor", "redis-monitor", "crawler", "rest"}
    assert everything["crawler"] == crawler
    assert everything["kafka-monitor"] == {k: km[k] for k in ("total", "fail", "plugins", "nodes")}
    assert everything["rest"] == {"nodes": {"rest-host": ["rest1"]}}


def test_stats_dumps_are_logged_every_period(cluster: TestCluster, filled, caplog) -> None:
    caplog.set_level(logging.INFO, logger="redis_monitor")
    with running_monitor(cluster, STATS_DUMP=0.2, STATS_CYCLE=0.05) as monitor:
        add_jobs(filled, "stats", [{"uuid": "s1", "appid": "testapp", "stats": "queue"}])

        def dumped() -> dict[str, logging.LogRecord]:
            return {r.getMessage(): r for r in caplog.records if r.getMessage().endswith("Stats Dump")}

        records = drive(monitor, lambda: len(dumped()) == 3 and dumped())
    monitor_dump = vars(records["Redis Monitor Stats Dump"])
    assert monitor_dump["total_lifetime"] >= 1
    assert monitor_dump["plugin_StatsMonitor_900"] >= 1
    crawler_dump = vars(records["Crawler Stats Dump"])
    assert (crawler_dump["link_200_900"], crawler_dump["link_504_lifetime"]) == (15, 2)
    assert (crawler_dump["unique_spider_count"], crawler_dump["total_spider_count"]) == (1, 2)
    assert crawler_dump["link_spider_count"] == 2
    queue_dump = vars(records["Queue Stats Dump"])
    assert queue_dump["total_backlog"] == 3
    assert queue_dump["queue_link"] == {"spider_backlog": 3, "num_domains": 2}


def _common(answer: dict) -> dict:
    return {k: answer[k] for k in ("stats", "appid", "uuid", "server_time")}
