"""Issue 31, seen by people: a crawl's revisit figures, pause, resume and drop through the REST gateway
(a real process) and `shoal revisit`, the Prometheus gauges, and the kafka monitor's check for a live
sink, all against the real services."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Page
from prometheus_client import CollectorRegistry, generate_latest

from kafka_monitor.sink_check import SinkCheck
from rest.envelope import ApiError
from rest.routes.revisits import _with_db
from revisit.claims import claim
from tests.e2e.test_dashboard_browser import browser_page  # noqa: F401 - the Chromium page fixture
from tests.integration.test_rest_helpers import base_url, client_of, gateway_cluster
from tests.integration.test_revisit_state import Sink, fetch
from tests.support.cluster import TestCluster
from tests.support.postgres import Postgres
from utils.config.clients import redis_client
from utils.config.settings import Settings
from utils.freshness import state
from utils.freshness.metrics import RevisitCollector
from utils.freshness.state import crawls, summary
from utils.observability.stats import beat
from utils.services import LocalServices

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


def tracked(sink: Sink, crawlid: str, n: int) -> None:
    messages = []
    for i in range(n):
        message = fetch(0)
        message.update(url=f"http://127.0.0.1:8190/v{crawlid}/{i}.html", crawlid=crawlid)
        messages.append(message)
    sink.write(*messages)


def test_rest_the_dashboard_and_the_cli_show_pause_resume_and_drop_a_crawls_revisits(
    services: LocalServices, tmp_path: Path, postgres: Postgres, pg_schema: str, browser_page: Page,  # noqa: F811
) -> None:
    sink = Sink(postgres, pg_schema)
    tracked(sink, "r1", 5)
    tracked(sink, "r2", 3)
    with gateway_cluster(services, tmp_path, **postgres.settings(pg_schema)) as cluster:
        http = client_of(cluster)
        every = http.get("/revisits").json()["data"]
        assert [(s["crawlid"], s["tracked"], s["due_now"]) for s in every] == [("r1", 5, 5), ("r2", 3, 3)]
        browser_page.goto(f"{base_url(cluster)}/dashboard")  # the dashboard's revisits card, in Chromium
        browser_page.wait_for_selector('tr[data-crawl="app/r2"]', timeout=15_000)
        cells = browser_page.locator('tr[data-crawl="app/r1"] td').all_inner_texts()
        assert cells[:2] == ["app/r1", "5"]
        assert cells[5] == "5 pages"
        assert http.post("/crawls/app/r1/revisits/pause").json()["data"]["paused"] is True
        with postgres.connect() as connection:
            assert {row.crawlid for row in claim(connection, pg_schema, 100, 3600)} == {"r2"}  # r1 held
        resumed = http.post("/crawls/app/r1/revisits/resume").json()["data"]
        assert (resumed["paused"], resumed["due_now"]) == (False, 5)  # none lost while paused
        assert http.delete("/crawls/app/r2/revisits").json()["data"] == {"dropped": 3}
        assert http.get("/crawls/app/r2/revisits").json()["data"]["tracked"] == 0

        def shoal(*argv: str) -> Any:
            done = subprocess.run([sys.executable, "-m", "utils.cli.main", "revisit", *argv], env=cluster.env,
                                  capture_output=True, text=True, timeout=60, check=True)  # fmt: skip
            return json.loads(done.stdout)

        assert shoal("pause", "app", "r1")["paused"] is True
        assert http.get("/crawls/app/r1/revisits").json()["data"]["paused"] is True
        assert shoal("drop", "app", "r1") == {"dropped": 5}
        assert http.get("/revisits").json()["data"] == []


def test_a_gateway_without_the_tables_answers_404_and_without_postgres_503(
    services: LocalServices, tmp_path: Path, postgres: Postgres, pg_schema: str
) -> None:
    with gateway_cluster(services, tmp_path, **postgres.settings(pg_schema)) as cluster:
        answer = client_of(cluster).get("/revisits")
        assert answer.status_code == 404
        assert "no sink" in answer.json()["error"]["message"]
    unreachable = {**postgres.settings(pg_schema), "SINK_POSTGRES_DSN": "postgresql://shoal@127.0.0.1:9/shoal"}
    with pytest.raises(ApiError) as refused:  # the routes' PostgreSQL step, without a second gateway
        _with_db(Settings.load(environ={f"SHOAL_{k}": v for k, v in unreachable.items()}), state.crawls)
    assert refused.value.status_code == 503


def test_prometheus_gauges_per_crawl(postgres: Postgres, pg_schema: str) -> None:
    tracked(Sink(postgres, pg_schema), "m1", 4)

    def read() -> list[dict[str, Any]]:
        with postgres.connect() as connection:
            return [summary(connection, pg_schema, a, c) for a, c in crawls(connection, pg_schema)]

    registry = CollectorRegistry()
    registry.register(RevisitCollector(read))
    text = generate_latest(registry).decode()
    assert 'shoal_revisits_due{appid="app",crawlid="m1"} 4.0' in text
    assert 'shoal_revisits_tracked{appid="app",crawlid="m1"} 4.0' in text
    assert 'shoal_revisit_changes_per_hour{appid="app",crawlid="m1"} 0.0' in text


def test_the_kafka_monitor_sees_a_live_sink_by_its_heartbeat(services: LocalServices, tmp_path: Path) -> None:
    cluster = TestCluster(services, tmp_path)
    check = SinkCheck.from_settings(cluster.settings)
    check.every = 0  # look every time
    assert check() is False  # no sink: a crawl with `revisit` is refused
    beat(redis_client(cluster.settings), "sink", "host-a", "42", 60, "stats:sink:host-a:42")
    assert check() is True
