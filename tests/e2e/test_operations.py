"""Operations: a node under supervisord crawls, survives a killed crawler, serves moving metrics,
and every component exits cleanly on SIGTERM.

Real `shoal up` (supervisord, local services on free ports, two crawlers), the demo site, and
`shoal feed`; nothing but the CLI a user would type.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.cluster import REPO, TestCluster
from tests.support.kafka import TopicReader
from tests.support.services import wait_until
from utils.demosite import SiteServer, generate_site
from utils.services import free_port, free_ports

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]


def shoal(options: list[str], *command: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "utils.cli.main", *options, *command], cwd=REPO, capture_output=True,
                          text=True, timeout=timeout, check=False)  # fmt: skip


def status(options: list[str]) -> dict[str, Any]:
    return json.loads(shoal(options, "status", "--json").stdout)


def running(options: list[str], name: str) -> dict[str, Any] | None:
    for process in status(options)["processes"]:
        if process["name"] == name and process["state"] == "RUNNING":
            return process
    return None


@pytest.fixture
def node(tmp_path: Path) -> Iterator[dict[str, Any]]:
    redis, kafka, zookeeper, rest = free_ports(4)
    options = [
        "-s", f"REDIS_PORT={redis}", "-s", f"KAFKA_HOSTS=127.0.0.1:{kafka}",
        "-s", f"ZOOKEEPER_HOSTS=127.0.0.1:{zookeeper}", "-s", f"REST_PORT={rest}",
        "-s", f"RUN_DIR={tmp_path / 'run'}", "-s", "KAFKA_TOPIC_PREFIX=ops",
        "-s", "QUEUE_HITS=0", "-s", "LEASE_TIMEOUT=6", "-s", "SCHEDULER_IDLE_POLL=0.05",
    ]  # fmt: skip
    up = shoal(options, "up", "--crawlers", "2", timeout=180)
    assert up.returncode == 0, up.stdout + up.stderr
    try:
        yield {"options": options, "kafka": f"127.0.0.1:{kafka}", "run_dir": tmp_path / "run" / "default"}
    finally:
        down = shoal(options, "down", timeout=180)
        print(down.stdout, down.stderr)


def metric_total(url: str, name: str) -> float:
    """Sum of every sample of a metric family in a Prometheus text exposition."""
    text = urllib.request.urlopen(url, timeout=5).read().decode()
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith(name) and not line.startswith("#"))  # fmt: skip


def test_a_node_crawls_survives_a_killed_crawler_and_serves_moving_metrics(node: dict[str, Any]) -> None:
    site = generate_site(hosts=2, pages_per_host=150, seed=11, base_ip_octet=120, port=free_port())
    expected = site.reachable(site.seed_urls(), 10)
    options = node["options"]
    wait_until(lambda: running(options, "shoal:crawler-00") and running(options, "shoal:crawler-01")
               and running(options, "shoal:redis-monitor"), 60, message="components not RUNNING")  # fmt: skip
    with SiteServer(site, delay=0.02):  # slow enough that the kill lands mid-crawl
        firehose = TopicReader(node["kafka"], "ops.crawled_firehose")
        for seed in site.seed_urls():
            fed = shoal(
                options,
                "feed",
                json.dumps({"url": seed, "appid": "opsapp", "crawlid": "ops1", "maxdepth": 10, "deny_extensions": []}),
            )
            assert fed.returncode == 0, fed.stderr
        firehose.wait_for(lambda got: len(got) >= 40, timeout=60, message="the crawl did not start")
        victim = running(options, "shoal:crawler-00")
        assert victim is not None
        os.kill(victim["pid"], signal.SIGKILL)
        restarted = wait_until(lambda: (p := running(options, "shoal:crawler-00")) and p["pid"] != victim["pid"]
                               and p, 60, message="supervisord did not restart the killed crawler")  # fmt: skip
        assert restarted["pid"] != victim["pid"]

        monitor = running(options, "shoal:redis-monitor")
        assert monitor is not None
        assert monitor.get("metrics_url"), "redis monitor publishes no metrics URL"
        firehose.wait_for(
            lambda got: {p["url"] for p in got} >= set(expected),
            timeout=120,
            message="not every page arrived after the crawler was killed",
        )
        firehose.close()
    for process in status(options)["processes"]:
        if process["name"].startswith("shoal:") and process["state"] == "RUNNING":
            url = process.get("metrics_url")
            assert url, f"{process['name']} has no metrics_url"
            assert metric_total(url, "shoal_healthy") >= 0  # answers, in the Prometheus format


@pytest.mark.parametrize(("command", "ready"), [
    (["kafka-monitor"], "Kafka monitor started"),
    (["redis-monitor"], "Redis monitor started"),
    (["crawl", "--spider", "link"], "Scheduler opened"),
])  # fmt: skip
def test_sigterm_stops_each_component_cleanly(cluster: TestCluster, command: list[str], ready: str) -> None:
    component = cluster.start(*command)
    wait_until(lambda: ready in component.log_path.read_text(errors="replace"), 60,
               message=f"{command[0]} did not start:\n{component.log_tail()}")  # fmt: skip
    started = time.monotonic()
    code = component.stop(timeout=30)
    assert code == 0, component.log_tail()
    assert time.monotonic() - started < 30
