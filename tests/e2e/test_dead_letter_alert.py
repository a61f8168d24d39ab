"""The dead-letter alert of docker/prometheus/alerts.yml fires on a real crawl (issue 33).

Every page of a host whose ladder is paused (level 4) is dead-lettered as its throttle lets it
through; Debian's Prometheus scrapes the crawler's real metrics endpoint every second and evaluates
ShoalDeadLettersGrowing with its expression, threshold and `for:` unchanged but its durations in
seconds instead of minutes (5m -> 5s), so the test lasts seconds. The alert is inactive while the
crawler has no dead letters, then pending, then firing within its rate window plus its `for:`.
(Each rule's silent cases are promtool's unit tests, tests/unit/test_alert_rules.py.)
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.e2e.test_metrics_and_logs import start_with_metrics
from tests.support.cluster import REPO, TestCluster
from tests.support.kafka import produce
from tests.support.services import wait_until
from utils.config.clients import redis_client
from utils.demosite.pushback import Pushback, PushbackSite
from utils.frontier.ladder import Ladder
from utils.services import free_port

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(180)]

ALERT = "ShoalDeadLettersGrowing"
HOST = "127.0.0.94"
THROTTLED = {"QUEUE_HITS": 4, "QUEUE_WINDOW": 1, "QUEUE_MODERATED": True, "ROBOTSTXT_OBEY": False}


def seconds_rule(rule: dict[str, Any]) -> dict[str, Any]:
    """The rule with every duration in seconds instead of minutes (`[5m]` -> `[5s]`, `for: 5m` -> `5s`)."""
    expr = re.sub(r"\[(\d+)m\]", r"[\1s]", rule["expr"])
    return {**rule, "expr": expr, "for": re.sub(r"^(\d+)m$", r"\1s", rule["for"])}


@pytest.fixture
def prometheus(tmp_path: Path) -> Iterator[tuple[Path, str]]:
    """Debian's Prometheus on a free port, scraping and evaluating every second; stopped by pid."""
    binary = shutil.which("prometheus")
    assert binary, "no prometheus: `make test-system-deps` installs Debian's prometheus package"
    port = free_port()
    config = tmp_path / "prometheus.yml"
    process = None

    def start(target: str) -> str:
        nonlocal process
        rules = yaml.safe_load((REPO / "docker" / "prometheus" / "alerts.yml").read_text())
        rule = next(r for g in rules["groups"] for r in g["rules"] if r["alert"] == ALERT)
        (tmp_path / "alerts.yml").write_text(yaml.safe_dump({"groups": [{"name": "t", "rules": [seconds_rule(rule)]}]}))
        config.write_text(yaml.safe_dump({
            "global": {"scrape_interval": "1s", "evaluation_interval": "1s"}, "rule_files": ["alerts.yml"],
            "scrape_configs": [{"job_name": "crawler", "static_configs": [{"targets": [target.split("/")[2]]}]}],
        }))  # fmt: skip
        process = subprocess.Popen([binary, f"--config.file={config}", f"--storage.tsdb.path={tmp_path / 'tsdb'}",
                                    f"--web.listen-address=127.0.0.1:{port}"], stdout=subprocess.DEVNULL,
                                   stderr=open(tmp_path / "prometheus.log", "wb"))  # noqa: SIM115  # fmt: skip
        wait_until(lambda: _get(f"http://127.0.0.1:{port}/-/ready") is not None, timeout=30, message="prometheus")
        return f"http://127.0.0.1:{port}"

    yield start  # type: ignore[misc]
    if process is not None:
        process.terminate()
        process.wait(10)


def _get(url: str) -> Any:
    try:
        with urllib.request.urlopen(url, timeout=2) as answer:
            body = answer.read()
        return json.loads(body) if body.startswith(b"{") else body
    except OSError:
        return None


def history(api: str, since: float) -> Any:
    """The dead-letter counter as Prometheus scraped it, for a failure's message."""
    query = urllib.parse.urlencode({"query": "sum(shoal_dead_letters_total)", "start": since - 5, "end": time.time(),
                                    "step": "1"})  # fmt: skip
    answer = _get(f"{api}/api/v1/query_range?{query}") or {}
    return [value for series in answer.get("data", {}).get("result", []) for value in series["values"]]


def scraping(api: str) -> bool:
    answer = _get(f"{api}/api/v1/targets") or {}
    targets = answer.get("data", {}).get("activeTargets", [])
    return bool(targets) and all(target["health"] == "up" for target in targets)


def alert_state(api: str) -> str:
    answer = _get(f"{api}/api/v1/alerts") or {"data": {"alerts": []}}
    states = [a["state"] for a in answer["data"]["alerts"] if a["labels"]["alertname"] == ALERT]
    return states[0] if states else "inactive"


@pytest.mark.parametrize("cluster", [THROTTLED], indirect=True)
def test_a_crawl_whose_every_page_dead_letters_fires_the_dead_letter_alert(cluster: TestCluster, prometheus) -> None:
    rule = next(r for g in yaml.safe_load((REPO / "docker/prometheus/alerts.yml").read_text())["groups"]
                for r in g["rules"] if r["alert"] == ALERT)  # fmt: skip
    window, hold = (int(re.search(r"\[(\d+)m\]", rule["expr"]).group(1)), int(rule["for"].rstrip("m")))  # type: ignore[union-attr]
    with PushbackSite({HOST: Pushback()}, free_port(), pages=60) as site:
        cluster.start("kafka-monitor")
        _, metrics = start_with_metrics(cluster, "crawler", "crawl", "--spider", "link")
        wait_until(lambda: _get(metrics) is not None, timeout=60, message="crawler metrics")
        api = prometheus(metrics)
        kafka, topic = cluster.settings.get_list("KAFKA_HOSTS")[0], cluster.settings.incoming_topic
        wait_until(lambda: scraping(api), timeout=30, message="prometheus does not scrape the crawler")
        assert alert_state(api) == "inactive"  # a crawler without dead letters
        Ladder(redis_client(cluster.settings), 10, 600).set_level("link", HOST, 4, reason="test: paused")
        time.sleep(0.5)  # LADDER_REFRESH: the crawler reads the level again
        started = time.time()
        requests = [{"url": url, "appid": "dlqapp", "crawlid": "dead", "maxdepth": 0} for url in site.urls(HOST)]
        produce(kafka, topic, requests)
        seen = set()
        deadline = started + window + hold + 10  # rate window, `for:`, scrape and evaluation slack
        while time.time() < deadline and "firing" not in seen:
            seen.add(alert_state(api))
            time.sleep(0.2)
        fired_after = time.time() - started
    assert "firing" in seen, f"not firing {fired_after:.1f} s after the paused crawl started: {history(api, started)}"
    assert "pending" in seen  # held for `for:` before firing
    assert fired_after >= hold
    assert not site.log[HOST]  # the paused domain was never fetched
    print(f"\n{ALERT} fired {fired_after:.1f} s after the paused crawl started (window {window}s, for {hold}s)")
