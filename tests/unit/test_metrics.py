"""The metrics library without sockets: helpers move the right series, labels stay bounded, URLs are
published where `shoal status` reads them.

The registry is one per process, shared with every other test of the session: assertions compare
values before and after, never absolute counts.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from utils.config.settings import Settings
from utils.frontier.metrics import FrontierCollector
from utils.node.layout import NodeLayout
from utils.node.status import add_metrics_urls, format_metrics
from utils.observability import metrics
from utils.observability.metrics import publish
from utils.observability.metrics.registry import LABELS, OTHER, REGISTRY, STATE, LabelBudget
from utils.observability.metrics.server import configure_process, url_for


def value(name: str, **labels: str) -> float:
    """A sample's current value, 0 when the series does not exist yet."""
    found = REGISTRY.get_sample_value(name, labels)
    return 0.0 if found is None else found


@pytest.fixture
def component(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """This process plays the crawler for one test; its health series are dropped afterwards.

    The test gets a label budget of its own: whichever tests ran before in this process (their
    order is random) have not spent it, so `link` is not counted under "other"."""
    monkeypatch.setattr(LABELS, "_seen", {})
    before = STATE.component
    STATE.dependencies.clear()
    configure_process(Settings.load(environ={}), "crawler")
    yield "crawler"
    configure_process(Settings.load(environ={}), before)  # forgets this test's component and health
    STATE.dependencies.clear()


def test_a_page_counts_under_its_status_with_size_and_time(component: str) -> None:
    ok, failed = (
        value("shoal_pages_total", spiderid="link", status="200"),
        value("shoal_pages_total", spiderid="link", status="error"),
    )
    size = value("shoal_page_bytes_total", spiderid="link")
    timed = value("shoal_download_duration_seconds_count", spiderid="link")

    metrics.record_page("link", 200, size=1500, seconds=0.2)
    metrics.record_page("link", None)

    assert value("shoal_pages_total", spiderid="link", status="200") == ok + 1
    assert value("shoal_pages_total", spiderid="link", status="error") == failed + 1
    assert value("shoal_page_bytes_total", spiderid="link") == size + 1500
    assert value("shoal_download_duration_seconds_count", spiderid="link") == timed + 1


@pytest.mark.parametrize(
    ("status", "label"), [(200, "200"), ("404", "404"), (None, "error"), (0, "error"), (999, "error"), ("x", "error")]
)
def test_status_labels_are_http_codes_or_error(status: int | str | None, label: str) -> None:
    assert metrics.status_label(status) == label


def test_every_event_helper_moves_its_series(component: str) -> None:
    # Label values are budgeted per process: once a test session has produced to many topics, a
    # new one is counted under "other". Ask the budget which series this topic lands in.
    topic = LABELS("topic", "demo.crawled_firehose")
    cases = [
        (lambda: metrics.record_retry("link", "503"), "shoal_retries_total", {"spiderid": "link", "reason": "503"}),
        (lambda: metrics.record_throttle_denials("link", 3), "shoal_throttle_denials_total", {"spiderid": "link"}),
        (lambda: metrics.record_dead_letter("retries_exhausted"), "shoal_dead_letters_total",
         {"component": "crawler", "reason": "retries_exhausted"}),
        (lambda: metrics.record_produced("demo.crawled_firehose"), "shoal_kafka_produced_total",
         {"component": "crawler", "topic": topic, "outcome": "sent"}),
        (lambda: metrics.record_enqueued("link", 5), "shoal_requests_enqueued_total",
         {"component": "crawler", "spiderid": "link"}),
        (lambda: metrics.record_dropped("link", "duplicate", 2), "shoal_requests_dropped_total",
         {"component": "crawler", "spiderid": "link", "reason": "duplicate"}),
        (lambda: metrics.record_leases_returned("link", 4), "shoal_leases_returned_total", {"spiderid": "link"}),
        (lambda: metrics.record_incoming("crawl", "queued"), "shoal_incoming_messages_total",
         {"kind": "crawl", "outcome": "queued"}),
        (lambda: metrics.record_job("info", "answered"), "shoal_jobs_total", {"kind": "info", "outcome": "answered"}),
        (lambda: metrics.record_leases_reaped("link", 2), "shoal_leases_reaped_total", {"spiderid": "link"}),
        (lambda: metrics.record_crawl_ended("finished"), "shoal_crawls_ended_total", {"how": "finished"}),
        (lambda: metrics.record_rest_request("post", "/feed", 200, 0.01), "shoal_rest_requests_total",
         {"method": "POST", "route": "/feed", "status": "200"}),
        (lambda: metrics.observe_batch(0.03), "shoal_batch_duration_seconds_count", {"component": "crawler"}),
    ]  # fmt: skip
    for call, name, labels in cases:
        before = value(name, **labels)
        call()
        assert value(name, **labels) > before, name


def test_zero_counts_create_no_series(component: str) -> None:
    metrics.record_throttle_denials("never-denied", 0)

    assert REGISTRY.get_sample_value("shoal_throttle_denials_total", {"spiderid": "never-denied"}) is None


def test_health_follows_every_reported_dependency(component: str) -> None:
    assert value("shoal_healthy", component="crawler") == 1

    metrics.set_dependency_up("redis", True)
    metrics.set_dependency_up("kafka", False)
    assert value("shoal_healthy", component="crawler") == 0
    assert value("shoal_dependency_up", component="crawler", dependency="kafka") == 0
    assert not metrics.is_healthy()

    metrics.set_dependency_up("kafka", True)
    assert value("shoal_healthy", component="crawler") == 1
    assert value("shoal_dependency_up", component="crawler", dependency="redis") == 1


def test_the_loop_timestamp_is_the_last_turn(component: str) -> None:
    metrics.mark_loop(now=1234.5)

    assert value("shoal_loop_timestamp_seconds", component="crawler") == 1234.5


def test_the_process_says_which_component_it_is(component: str) -> None:
    info = [s for s in REGISTRY.collect() if s.name == "shoal_process"][0].samples
    mine = [sample for sample in info if sample.labels["component"] == "crawler"]

    assert mine
    assert mine[0].labels["version"]
    assert mine[0].labels["host"]


def test_a_label_keeps_a_bounded_number_of_values() -> None:
    budget = LabelBudget(limit=3)

    kept = [budget("reason", f"r{n}") for n in range(10)]

    assert kept == ["r0", "r1", "r2"] + [OTHER] * 7
    assert budget("reason", "r1") == "r1"  # a value already seen keeps its series
    assert budget("topic", "t9") == "t9"  # the budget is per label name
    assert budget("reason", "") == OTHER


def test_random_reasons_cannot_grow_the_registry(component: str) -> None:
    def series() -> int:
        return len([s for f in REGISTRY.collect() if f.name == "shoal_retries" for s in f.samples])

    before = series()
    for n in range(500):
        metrics.record_retry("link", f"random-{n}")

    assert series() - before <= 51  # at most METRICS_LABEL_VALUES new reasons plus "other"


def test_urls_name_a_local_address() -> None:
    assert url_for("0.0.0.0", 9410) == "http://127.0.0.1:9410/metrics"
    assert url_for("127.0.0.2", 80) == "http://127.0.0.2:80/metrics"
    assert url_for("::1", 9410) == "http://[::1]:9410/metrics"
    assert url_for("crawler-1", 9410) == "http://crawler-1:9410/metrics"


def test_metrics_settings_read_from_the_environment() -> None:
    settings = Settings.load(environ={"SHOAL_METRICS_PORT": "9410", "SHOAL_METRICS_ENABLED": "false"})

    assert settings.get_int("METRICS_PORT") == 9410
    assert settings.get_bool("METRICS_ENABLED") is False
    assert Settings.load(environ={})["METRICS_PORT"] == 0  # a free port by default: processes share a host


def _supervised(run_dir: Path, program: str) -> dict[str, str]:
    """The environment supervisord gives a child of the node at `run_dir`."""
    return {"SUPERVISOR_SERVER_URL": f"unix://{run_dir}/supervisor.sock", "SUPERVISOR_PROCESS_NAME": program}


def test_a_supervised_process_publishes_its_url_in_the_node_run_dir(tmp_path: Path) -> None:
    path = publish.publish("http://127.0.0.1:4321/metrics", "crawler", _supervised(tmp_path, "crawler-01"))

    assert path == tmp_path / "metrics" / "crawler-01.json"
    record = json.loads(path.read_text())
    assert record == {"url": "http://127.0.0.1:4321/metrics", "pid": os.getpid(), "component": "crawler"}
    assert publish.read_url(path, os.getpid()) == "http://127.0.0.1:4321/metrics"
    assert publish.read_url(path, os.getpid() + 1) is None  # another (restarted) process: not its URL

    publish.unpublish(path)
    assert not path.exists()


@pytest.mark.parametrize(
    "environ",
    [{}, {"SUPERVISOR_SERVER_URL": "http://127.0.0.1:9001", "SUPERVISOR_PROCESS_NAME": "rest"},
     {"SUPERVISOR_SERVER_URL": "unix:///tmp/x/supervisor.sock"}],
)  # fmt: skip
def test_outside_a_node_nothing_is_published(environ: dict[str, str]) -> None:
    assert publish.publish("http://127.0.0.1:1/metrics", "rest", environ) is None


def test_status_shows_the_url_of_each_current_process_only(tmp_path: Path) -> None:
    layout = NodeLayout(node="n1", run_root=tmp_path, local=())
    publish.publish("http://127.0.0.1:4321/metrics", "rest", _supervised(layout.run_dir, "rest"))
    publish.publish("http://127.0.0.1:4322/metrics", "crawler", _supervised(layout.run_dir, "crawler-00"))
    rows = [
        {"name": "shoal:rest", "pid": os.getpid()},
        {"name": "shoal:crawler-00", "pid": os.getpid() + 1},  # restarted since it wrote its file
        {"name": "services:redis", "pid": 77},
        {"name": "shoal:redis-monitor", "pid": 0},
    ]

    shown = add_metrics_urls(rows, layout)

    assert [row["metrics_url"] for row in shown] == ["http://127.0.0.1:4321/metrics", None, None, None]
    assert format_metrics(shown).split() == ["shoal:rest", "http://127.0.0.1:4321/metrics"]


def test_the_frontier_collector_describes_its_series_without_reading_redis() -> None:
    settings = Settings.load(environ={"SHOAL_REDIS_PORT": "1"})  # nothing listens: describe must not connect
    collector = FrontierCollector.from_settings(settings)

    names = {family.name for family in collector.describe()}

    assert {"shoal_queue_depth", "shoal_inflight_requests", "shoal_retrying_requests", "shoal_domain_backlog",
            "shoal_backlog_domains", "shoal_frontier_up", "shoal_jobs_lag"} <= names  # fmt: skip


def test_naming_the_component_moves_health_reported_before_it(component: str) -> None:
    configure_process(Settings.load(environ={}), "early")
    metrics.set_dependency_up("zookeeper", False)

    configure_process(Settings.load(environ={}), "redis-monitor")

    assert REGISTRY.get_sample_value("shoal_healthy", {"component": "early"}) is None
    assert REGISTRY.get_sample_value("shoal_dependency_up", {"component": "early", "dependency": "zookeeper"}) is None
    assert value("shoal_dependency_up", component="redis-monitor", dependency="zookeeper") == 0
    assert value("shoal_healthy", component="redis-monitor") == 0
