"""`shoal status` names the services a process cannot reach, read from that process's /metrics."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from utils.node.status import add_unreachable, format_table
from utils.observability import stats
from utils.observability.metrics import set_dependency_up
from utils.observability.metrics.health import check
from utils.observability.metrics.registry import STATE

METRICS = """# TYPE shoal_dependency_up gauge
shoal_dependency_up{component="crawler",dependency="redis"} 0.0
shoal_dependency_up{component="crawler",dependency="kafka"} 1.0
shoal_dependency_up{component="crawler",dependency="zookeeper"} 0.0
# TYPE shoal_healthy gauge
shoal_healthy{component="crawler"} 0.0
"""


class Metrics(BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        body = METRICS.encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *_: object) -> None:
        pass


@pytest.fixture(autouse=True)
def no_dependency_reported() -> Iterator[None]:
    """The process-wide dependency states start empty: another test of this worker may have left one down."""
    with STATE.lock:
        kept = dict(STATE.dependencies)
        STATE.dependencies.clear()
    yield
    with STATE.lock:
        STATE.dependencies.clear()
        STATE.dependencies.update(kept)


@pytest.fixture
def metrics_url() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Metrics)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/metrics"
    server.shutdown()
    server.server_close()


def row(name: str, url: str | None) -> dict:
    return {"name": name, "state": "RUNNING", "pid": 4242, "uptime": 5, "description": "", "metrics_url": url}


def test_status_names_the_services_a_process_cannot_reach(metrics_url: str) -> None:
    rows = add_unreachable([row("shoal:crawler-0", metrics_url), row("services:redis", None)])
    assert [r["unreachable"] for r in rows] == [["redis", "zookeeper"], None]
    table = format_table(rows).splitlines()
    assert table[1].endswith("cannot reach redis, zookeeper")
    assert "cannot reach" not in table[2]


def test_the_health_check_names_them_too(metrics_url: str) -> None:
    assert check(metrics_url) == (False, "unhealthy: cannot reach redis, zookeeper")


def test_a_process_whose_metrics_do_not_answer_is_not_called_unreachable() -> None:
    rows = add_unreachable([row("shoal:crawler-0", "http://127.0.0.1:9/metrics")])
    assert rows[0]["unreachable"] is None


def test_a_heartbeat_carries_the_services_its_process_cannot_reach(redis_client) -> None:
    """What the dashboard's process card shows amber: the services named in live heartbeats, and
    processes whose heartbeat is late (they may not reach Redis to say so)."""
    kind = f"component{uuid.uuid4().hex[:8]}"  # the heartbeat index is shared: a component name of its own
    set_dependency_up("kafka", False)
    try:
        stats.beat(redis_client, kind, "h1", "a", 60, f"{kind}:beat:a")
        stats.beat(redis_client, kind, "h1", "b", 60, f"{kind}:beat:b")
        assert stats.process_health(redis_client, kind, 60, 30) == {"unreachable": {"kafka": 2}, "late": 0}
        set_dependency_up("kafka", True)
        stats.beat(redis_client, kind, "h1", "a", 60, f"{kind}:beat:a")
        assert stats.process_health(redis_client, kind, 60, 30) == {"unreachable": {"kafka": 1}, "late": 0}
        redis_client.zadd(stats.HEARTBEATS, {f"{kind}|h1|b": time.time() - 40})  # b stopped beating 40 s ago
        stats.beat(redis_client, kind, "h1", "a", 60, f"{kind}:beat:a")
        assert stats.process_health(redis_client, kind, 60, 30) == {"unreachable": {"kafka": 1}, "late": 1}
        assert 0 < redis_client.ttl(stats.UNREACHABLE) <= 60
    finally:
        set_dependency_up("kafka", True)
