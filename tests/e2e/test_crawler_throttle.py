"""The cluster-wide throttle on real `shoal crawl` processes: live ZooKeeper overrides and blacklist,
IP-keyed throttles with a local public-IP answer, and the accuracy of hits/window across spiders."""

from __future__ import annotations

import time

import pytest
import yaml

from tests.e2e.test_crawler_fields import start_crawler
from tests.e2e.test_crawler_helpers import EchoServer, crawler_started, progress, seed, settled
from tests.support.cluster import TestCluster
from tests.support.services import wait_until
from utils.config.clients import redis_client
from utils.demosite import SiteServer, generate_site
from utils.frontier import keys, throttle_state
from utils.services import free_port

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def site_server(tmp_path_factory):
    site = generate_site(hosts=1, pages_per_host=200, seed=13, base_ip_octet=152, port=free_port())
    with SiteServer(site, access_log=tmp_path_factory.mktemp("throttle") / "access.log") as server:
        yield site, server


def page_hit_times(server: SiteServer, since: float) -> list[float]:
    """When the server answered each page request from `since` on (its access log, unix seconds)."""
    assert server.access_log is not None
    lines = (line.split() for line in server.access_log.read_text().splitlines())
    return sorted(t for *_, path, _status, at in lines if path.startswith("/page/") and (t := float(at)) >= since)


def page_hits(server: SiteServer) -> int:
    return sum(n for (_host, path), n in list(server.hits.items()) if path.startswith("/page/"))


def write_config(zk_client, path: str, config: dict) -> None:
    zk_client.ensure_path(path)
    zk_client.set(path, yaml.safe_dump(config).encode())


@pytest.mark.timeout(90)
@pytest.mark.parametrize("cluster", [{"QUEUE_HITS": 1, "QUEUE_WINDOW": 600, "QUEUE_MODERATED": False}], indirect=True)
def test_a_zookeeper_override_and_blacklist_apply_within_two_seconds(
    cluster: TestCluster, site_server, zk_client
) -> None:
    site, server = site_server
    domain = site.hosts[0].split(":")[0]
    path = cluster.settings.zookeeper_config_path
    write_config(zk_client, path, {"domains": {}, "blacklist": []})
    server.hits.clear()
    start_crawler(cluster)
    for i in range(40):
        seed(cluster, f"http://{site.hosts[0]}/page/{i}.html", crawlid="zk")
    wait_until(lambda: page_hits(server) == 1, timeout=30)  # 1 hit per 600 s: then nothing
    time.sleep(1.0)  # a second in which the default throttle allows nothing more
    assert page_hits(server) == 1

    changed = time.monotonic()
    write_config(zk_client, path, {"domains": {domain: {"hits": 20, "window": 1, "scale": 1.0}}, "blacklist": []})
    wait_until(lambda: page_hits(server) >= 2, timeout=5)
    assert time.monotonic() - changed <= 2.0

    write_config(zk_client, path, {"domains": {domain: {"hits": 20, "window": 1}}, "blacklist": [domain]})
    blacklisted = time.monotonic()
    time.sleep(2.0)  # the blacklist is live within this; nothing is popped after it
    frozen = page_hits(server)
    time.sleep(1.5)
    assert page_hits(server) == frozen < 40
    assert time.monotonic() - blacklisted >= 3.0
    write_config(zk_client, path, {"domains": {domain: {"hits": 100, "window": 1}}, "blacklist": []})
    wait_until(lambda: settled(progress(cluster, "zk")), timeout=30)
    assert progress(cluster, "zk")["crawled"] == 40


IP_PORT = free_port("127.0.0.153")  # the local "public IP" service: tests never touch the internet


@pytest.mark.timeout(90)
@pytest.mark.parametrize(
    "cluster",
    [{"SCHEDULER_IP_ENABLED": "true", "PUBLIC_IP_URL": f"http://127.0.0.153:{IP_PORT}/ip", "QUEUE_HITS": 50,
      "QUEUE_WINDOW": 1, "ZOOKEEPER_ENABLED": "false"}],
    indirect=True,
)  # fmt: skip
def test_an_ip_keyed_throttle_uses_the_public_ip_from_the_configured_source(cluster: TestCluster, site_server) -> None:
    site, _server = site_server
    with EchoServer("127.0.0.153", IP_PORT) as echo:
        start_crawler(cluster)
        seed(cluster, site.seed_urls()[0], crawlid="ip")
        wait_until(lambda: settled(progress(cluster, "ip")), timeout=30)
        assert echo.of("/ip")
    domain = site.hosts[0].split(":")[0]
    client = redis_client(cluster.settings)
    state = throttle_state.read(client, keys.throttle_key(domain, "link", "10.9.8.7"), domain)
    assert state is not None
    assert state.hits


@pytest.mark.slow
@pytest.mark.timeout(150)
@pytest.mark.parametrize("cluster", [{"QUEUE_HITS": 20, "QUEUE_WINDOW": 10, "QUEUE_MODERATED": "true"}], indirect=True)
def test_three_spider_processes_share_one_domain_throttle_within_five_percent(
    cluster: TestCluster, site_server
) -> None:
    site, server = site_server
    for _ in range(3):
        cluster.start("crawl", "--spider", "link")
    wait_until(lambda: crawler_started(cluster, 3), timeout=60)
    since = time.time()
    for i in range(200):
        seed(cluster, f"http://{site.hosts[0]}/page/{i}.html", crawlid="rate")
    wait_until(lambda: page_hit_times(server, since), timeout=30, interval=0.05)
    time.sleep(62)  # past the measured window
    # The window is counted by the server's own clock (its access log), so a test process that wakes
    # late on a loaded machine does not count pages served after it.
    times = page_hit_times(server, since)
    got = sum(t < times[0] + 60 for t in times)
    print(f"\n[throttle accuracy] {got} requests in 60 s, expected 120")
    assert 114 <= got <= 126, got  # 20 hits per 10 s for 60 s = 120, +/-5 %
