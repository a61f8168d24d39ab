"""Scale out (issue 12): two nodes on one Kafka, one three-master Redis Cluster and one ZooKeeper.

Each node is a real `shoal up --services none --node NAME` (its own supervisord, run directory and
ports) whose components talk to the shared services. Mid-crawl one node is killed whole: its
supervisord and every process it runs get SIGKILL, as when a machine dies. The other node finishes
the crawl: every page of the site arrives, its leases come back through the redis monitor's reaper.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tests.support.cluster import REPO
from tests.support.kafka import TopicReader
from tests.support.processes import descendants
from tests.support.services import wait_until
from utils.demosite import SiteServer, generate_site
from utils.services import LocalServices, free_port
from utils.services.process import pid_alive
from utils.services.redis_cluster import RedisClusterHandle

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(420)]

COMPONENTS = ("shoal:kafka-monitor", "shoal:redis-monitor", "shoal:crawler-00")


def shoal(options: list[str], *command: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "utils.cli.main", *options, *command], cwd=REPO, capture_output=True,
                          text=True, timeout=timeout, check=False)  # fmt: skip


def processes(options: list[str], node: str) -> dict[str, dict[str, Any]]:
    report = json.loads(shoal(options, "status", "--json", "--node", node).stdout)
    return {p["name"]: p for p in report["processes"] if p["state"] == "RUNNING"}


@pytest.fixture
def shared(services: LocalServices, redis_cluster: RedisClusterHandle, tmp_path: Path) -> list[str]:
    """The settings both nodes share: the session broker and ZooKeeper, the emptied Redis Cluster."""
    redis_cluster.flush()
    prefix = f"scale{os.getpid()}{int(time.time()) % 100000}"
    return [
        "-s", "REDIS_CLUSTER=true", "-s", f"REDIS_HOST={redis_cluster.host}", "-s", f"REDIS_PORT={redis_cluster.port}",
        "-s", f"KAFKA_HOSTS={services.broker.address}", "-s", f"ZOOKEEPER_HOSTS={services.zookeeper.address}",
        "-s", f"ZOOKEEPER_ASSIGN_PATH=/shoal-test/{prefix}/", "-s", f"KAFKA_TOPIC_PREFIX={prefix}",
        "-s", f"KAFKA_GROUP={prefix}-group", "-s", f"RUN_DIR={tmp_path / 'run'}", "-s", "KAFKA_TOPIC_PARTITIONS=6",
        "-s", "QUEUE_HITS=15", "-s", "QUEUE_WINDOW=1", "-s", "LEASE_TIMEOUT=6",
        "-s", "REAPER_INTERVAL=0.5", "-s", "SCHEDULER_IDLE_POLL=0.05",
        "-s", "KAFKA_CONSUMER_SESSION_TIMEOUT_MS=6000", "-s", "KAFKA_CONSUMER_HEARTBEAT_MS=1000",
    ]  # fmt: skip


def start_node(shared: list[str], node: str) -> list[str]:
    options = [*shared, "-s", f"REST_PORT={free_port()}"]
    up = shoal(options, "up", "--services", "none", "--node", node, "--crawlers", "1")
    assert up.returncode == 0, up.stdout + up.stderr
    wait_until(lambda: set(COMPONENTS) <= set(processes(options, node)), 90, 0.5, f"node {node} never RUNNING")
    return options


def kill_node(options: list[str], node: str, run_dir: Path) -> int:
    """SIGKILL the node's supervisord and every process under it at once; returns how many died."""
    supervisord = int((run_dir / node / "supervisord.pid").read_text().strip())
    victims = [supervisord, *descendants(supervisord)]
    for pid in victims:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    wait_until(lambda: not any(pid_alive(pid) for pid in victims), 30, message="the node did not die")
    return len(victims)


def test_a_node_killed_whole_mid_crawl_loses_no_page(shared: list[str], services: LocalServices, tmp_path: Path):
    site = generate_site(hosts=3, pages_per_host=240, seed=12, base_ip_octet=180, port=free_port())
    expected = set(site.reachable(site.seed_urls(), 10))
    alpha = start_node(shared, "alpha")
    beta = start_node(shared, "beta")
    try:
        with SiteServer(site, delay=0.02):  # the throttle (15 pages/s per host) makes the kill land mid-crawl
            prefix = next(v.split("=", 1)[1] for v in shared if v.startswith("KAFKA_TOPIC_PREFIX="))
            firehose = TopicReader(services.broker.address, f"{prefix}.crawled_firehose")
            for seed in site.seed_urls():
                fed = shoal(alpha, "feed", json.dumps({"url": seed, "appid": "scale", "crawlid": "two-nodes",
                                                       "maxdepth": 10, "deny_extensions": []}))  # fmt: skip
                assert fed.returncode == 0, fed.stderr
            # an eighth in: a starved test process reads a few seconds of the crawl late, and the kill
            # must still find most of it to do
            firehose.wait_for(lambda got: len(got) >= len(expected) // 8, timeout=90, message="the crawl never started")
            before = len(firehose.messages)
            killed = kill_node(alpha, "alpha", tmp_path / "run")
            firehose.wait_for(lambda got: {p["url"] for p in got} >= expected, timeout=180,
                              message="node beta did not finish the crawl")  # fmt: skip
            firehose.poll(2.0)
            pages = Counter(p["url"] for p in firehose.messages)
            partitions = set(firehose.partitions)
            page_bytes = sum(len(json.dumps(p)) for p in firehose.messages) / len(firehose.messages)
            firehose.close()
    finally:
        shoal(beta, "down", "--node", "beta")
    lost = expected - set(pages)
    duplicated = sum(n - 1 for n in pages.values() if n > 1)
    print(f"\nscale-out: {len(expected)} pages expected, {len(pages)} distinct arrived, lost {len(lost)}, "
          f"duplicated {duplicated}; node alpha killed after {before} pages ({killed} processes); "
          f"{page_bytes:.0f} bytes per page message")  # fmt: skip
    assert before < len(expected) * 3 / 4  # the node died mid-crawl, with much of it still to do
    assert len(partitions) == 1  # keyed by crawlid: one crawl's pages keep their order in one partition
    assert not lost
    assert set(pages) >= expected
