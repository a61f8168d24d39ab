"""Every example of the reference §3.2–§3.4 sent as a Kafka message gets its documented answer.

Real `shoal kafka-monitor` and `shoal redis-monitor` processes on the session's Redis, broker and
ZooKeeper; no crawler runs, so the crawls' requests stay queued for info, stop and expiry.
"""

from __future__ import annotations

import time

import pytest

from tests.support.cluster import TestCluster
from tests.support.kafka import produce

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(180)]

ACTION_KEYS = {"uuid", "appid", "spiderid", "server_time"}
STATS_KEYS = {"stats", "appid", "uuid", "server_time"}
COMPONENT = {"total", "fail", "plugins", "nodes"}
EXAMPLES: dict[str, tuple[dict, set[str]]] = {
    "info-crawl": (
        {"action": "info", "appid": "testapp", "crawlid": "ABC123", "uuid": "abc12333", "spiderid": "link"},
        ACTION_KEYS | {"crawlid", "total_pending", "total_domains", "domains", "expires", "progress", "dupefilter"},
    ),
    "info-app": (
        {"action": "info", "appid": "testapp", "uuid": "abc12334", "spiderid": "link"},
        ACTION_KEYS | {"total_pending", "total_crawlids", "total_domains", "crawlids"},
    ),
    "stop": (
        {"action": "stop", "appid": "testapp", "crawlid": "ist234", "uuid": "1ist234", "spiderid": "link"},
        ACTION_KEYS | {"action", "crawlid", "total_purged"},
    ),
    "zookeeper": (
        {
            "uuid": "abc123",
            "appid": "madisonTest",
            "action": "domain-update",
            "domain": "dmoztools.net",
            "hits": 60,
            "window": 60,
            "scale": 0.9,
        },
        {"action", "domain", "server_time", "uuid", "appid"},
    ),  # fmt: skip
    **{
        f"stats-{kind}": ({"appid": "testapp", "uuid": f"hij-{kind}", "stats": kind}, STATS_KEYS | body)
        for kind, body in {
            "kafka-monitor": COMPONENT,
            "redis-monitor": COMPONENT,
            "crawler": {"spiders", "machines", "queue"},
            "spider": {"spiders"},
            "machine": {"machines"},
            "queue": {"queues"},
            "rest": {"nodes"},
            "all": {"kafka-monitor", "redis-monitor", "crawler", "rest"},
        }.items()
    },
}


def test_every_reference_example_is_answered_with_exactly_the_documented_keys(
    cluster: TestCluster, topic_reader
) -> None:
    bootstrap = cluster.settings.get_list("KAFKA_HOSTS")[0]
    outbound = topic_reader("outbound_firehose")
    cluster.start("kafka-monitor")
    cluster.start("redis-monitor")
    expires = int(time.time()) + 4
    crawls = [
        {"url": "http://www.dmoztools.net/", "appid": "testapp", "crawlid": "ABC123", "maxdepth": 2,
         "priority": 90, "expires": 1999999999},
        {"url": "http://ist.example.com/", "appid": "testapp", "crawlid": "ist234", "uuid": "seed-ist"},
        {"url": "http://soon.example.org/", "appid": "testapp", "crawlid": "short", "expires": expires},
    ]  # fmt: skip
    produce(bootstrap, cluster.settings.incoming_topic, crawls)
    outbound.wait_for(lambda got: any(m.get("uuid") == "seed-ist" for m in got), timeout=60)
    produce(bootstrap, cluster.settings.incoming_topic, [request for request, _ in EXAMPLES.values()])

    uuids = {request["uuid"]: name for name, (request, _) in EXAMPLES.items()}
    messages = outbound.wait_for(
        lambda got: {m.get("uuid") for m in got} >= set(uuids) and any(m.get("action") == "expired" for m in got),
        timeout=60,
    )
    by_name = {uuids[m["uuid"]]: m for m in messages if m.get("uuid") in uuids}
    for name, (_, keys) in EXAMPLES.items():
        assert set(by_name[name]) == keys, name
    assert by_name["info-crawl"]["total_pending"] == 1
    assert by_name["info-crawl"]["domains"] == {"dmoztools.net": {"total": 1, "high_priority": 90,
                                                                  "low_priority": 90}}  # fmt: skip
    assert by_name["stop"]["total_purged"] == 1
    assert "error" not in by_name["zookeeper"]
    (expired,) = [m for m in messages if m.get("action") == "expired"]
    assert set(expired) == {"server_time", "crawlid", "spiderid", "appid", "total_expired", "action"}
    assert (expired["crawlid"], expired["total_expired"]) == ("short", 1)
    assert expired["server_time"] >= expires
