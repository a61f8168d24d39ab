"""ZooKeeper updates on the real ensemble: the YAML node, errors, and concurrent monitors."""

from __future__ import annotations

import pytest
import yaml

from tests.integration.test_redis_monitor_helpers import add_jobs, answered, drive, new_uuid, running_monitor
from tests.support.cluster import TestCluster
from tests.support.services import wait_until
from utils.config.clients import redis_client
from utils.services import free_port

pytestmark = pytest.mark.integration


def zk_request(action: str, domain: str, **extra) -> dict:
    return {"uuid": new_uuid(), "appid": "madisonTest", "action": action, "domain": domain, "hits": 0,
            "window": 0, "scale": 1.0, **extra}  # fmt: skip


def node(zk_client, cluster: TestCluster) -> dict:
    data, _ = zk_client.get(cluster.settings.zookeeper_config_path)
    return yaml.safe_load(data)


def test_updates_change_the_yaml_node_and_are_answered_in_scrapy_clusters_shape(
    cluster: TestCluster, zk_client, topic_reader
) -> None:
    r = redis_client(cluster.settings, decode=True)
    outbound = topic_reader("outbound_firehose")
    first = [zk_request("domain-update", "dmoztools.net", hits=60, window=60, scale=0.9),
             zk_request("domain-update", "wikipedia.org", hits=30, window=60, scale=0.5),
             zk_request("blacklist-update", "ebay.com"), zk_request("blacklist-update", "ebay.com")]  # fmt: skip
    second = [zk_request("domain-remove", "wikipedia.org"), zk_request("blacklist-remove", "ebay.com"),
              zk_request("blacklist-update", "bad.com")]  # fmt: skip
    zero = zk_request("domain-update", "zero.com", hits=0, window=60)
    with running_monitor(cluster) as monitor:
        add_jobs(r, "zookeeper", first)
        got = drive(monitor, answered(outbound, [q["uuid"] for q in first]))
        after_first = node(zk_client, cluster)
        add_jobs(r, "zookeeper", [*second, zero])
        got.update(drive(monitor, answered(outbound, [q["uuid"] for q in [*second, zero]])))

    assert after_first == {
        "domains": {"dmoztools.net": {"window": 60, "hits": 60, "scale": 0.9},
                    "wikipedia.org": {"window": 60, "hits": 30, "scale": 0.5}},
        "blacklist": ["ebay.com"],
    }  # fmt: skip
    assert node(zk_client, cluster) == {
        "domains": {"dmoztools.net": {"window": 60, "hits": 60, "scale": 0.9}},
        "blacklist": ["bad.com"],
    }
    for request in [*first, *second]:
        answer = got[request["uuid"]]
        assert answer == {"action": request["action"], "domain": request["domain"], "uuid": request["uuid"],
                          "appid": "madisonTest", "server_time": answer["server_time"]}  # fmt: skip
    error = got[zero["uuid"]]
    assert (error["action"], error["error"]["message"]) == ("error", "'hits' and 'window' not set for domain update")


def test_a_zookeeper_failure_is_answered_with_an_error(cluster: TestCluster, topic_reader) -> None:
    r = redis_client(cluster.settings, decode=True)
    outbound = topic_reader("outbound_firehose")
    request = zk_request("blacklist-update", "ebay.com")
    add_jobs(r, "zookeeper", [request])
    with running_monitor(cluster, ZOOKEEPER_HOSTS=f"127.0.0.1:{free_port()}", ZOOKEEPER_TIMEOUT=1.0) as monitor:
        answer = drive(monitor, answered(outbound, [request["uuid"]]))[request["uuid"]]
    assert answer["error"] == "Unable to load Zookeeper config"
    assert (answer["action"], answer["domain"], answer["uuid"]) == ("blacklist-update", "ebay.com", request["uuid"])


@pytest.mark.timeout(120)
@pytest.mark.parametrize("cluster", [{"REDIS_MONITOR_BATCH": 5}], indirect=True)
def test_concurrent_updates_from_two_monitor_processes_all_land(cluster: TestCluster, zk_client, topic_reader) -> None:
    r = redis_client(cluster.settings, decode=True)
    outbound = topic_reader("outbound_firehose")
    monitors = [cluster.start("redis-monitor", name=f"redis-monitor-{n}") for n in range(2)]
    wait_until(lambda: len(r.zrange("stats:heartbeats", 0, -1)) >= 2, timeout=60, interval=0.2,
               message="two redis monitors did not start")  # fmt: skip
    requests = [zk_request("domain-update", f"site{n}.com", hits=n + 1, window=60) for n in range(40)]
    requests += [zk_request("blacklist-update", f"bad{n}.com") for n in range(20)]
    add_jobs(r, "zookeeper", requests)
    outbound.wait_for(lambda got: {m["uuid"] for m in got} >= {q["uuid"] for q in requests}, timeout=60)
    outbound.poll(1.0)
    assert sorted(m["uuid"] for m in outbound.messages) == sorted(q["uuid"] for q in requests)  # once each
    assert all("error" not in m for m in outbound.messages)
    config = node(zk_client, cluster)
    assert config["domains"] == {f"site{n}.com": {"window": 60, "hits": n + 1, "scale": 1.0} for n in range(40)}
    assert sorted(config["blacklist"]) == sorted(f"bad{n}.com" for n in range(20))
    for monitor in monitors:  # both took part
        assert "Received zookeeper request" in monitor.log_path.read_text()
