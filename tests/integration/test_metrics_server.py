"""The /metrics endpoint over real HTTP, the Docker health check against it, and the URL that a
process under a real supervisord publishes for `shoal status --json`."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import textwrap
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.metrics import scrape
from tests.support.services import wait_until
from utils.config.errors import ConfigError
from utils.config.settings import Settings
from utils.observability import metrics
from utils.observability.metrics.registry import STATE
from utils.observability.metrics.server import configure_process
from utils.services import free_port

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def served() -> Iterator[str]:
    """A metrics server of this process on a free port, as the crawler; stopped afterwards."""
    before = STATE.component
    STATE.dependencies.clear()
    url = metrics.start_metrics_server(Settings.load(environ={}), "crawler")
    assert url is not None
    yield url
    metrics.stop_metrics_server()
    configure_process(Settings.load(environ={}), before)  # forgets this test's component and health
    STATE.dependencies.clear()


def test_metrics_are_served_on_a_free_port_and_move(served: str) -> None:
    assert served.startswith("http://127.0.0.1:")
    assert served.endswith("/metrics")
    key = ("shoal_pages_total", (("spiderid", "link"), ("status", "200")))
    before = scrape(served).get(key, 0.0)

    metrics.record_page("link", 200)
    metrics.record_page("link", 200)

    samples = scrape(served)
    assert samples[key] == before + 2
    assert samples[("shoal_healthy", (("component", "crawler"),))] == 1
    assert samples[("process_resident_memory_bytes", ())] > 0
    assert not any(name.endswith("_created") for name, _ in samples)


def test_a_second_start_returns_the_same_server(served: str) -> None:
    assert metrics.start_metrics_server(Settings.load(environ={}), "crawler") == served
    assert metrics.metrics_url() == served


def test_stopping_closes_the_port(served: str) -> None:
    metrics.stop_metrics_server()

    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(served, timeout=2)
    assert metrics.metrics_url() is None


def test_disabled_metrics_serve_nothing() -> None:
    assert metrics.start_metrics_server(Settings.load(environ={"SHOAL_METRICS_ENABLED": "false"}), "rest") is None
    assert metrics.metrics_url() is None


def test_a_fixed_port_already_taken_is_a_config_error(served: str) -> None:
    metrics.stop_metrics_server()
    port = free_port()
    first = metrics.start_metrics_server(Settings.load(environ={"SHOAL_METRICS_PORT": str(port)}), "rest")
    assert first == f"http://127.0.0.1:{port}/metrics"
    code = ("from utils.config import settings; from utils.observability import metrics; "
            "metrics.start_metrics_server(settings.Settings.load(), 'rest')")

    done = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60, check=False,
        env={**os.environ, "SHOAL_METRICS_PORT": str(port)},
    )  # fmt: skip

    assert done.returncode != 0
    assert "cannot serve metrics on 127.0.0.1:" in done.stderr
    assert ConfigError.__name__ in done.stderr


def _health(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "utils.observability.metrics.health", *args], cwd=REPO, capture_output=True, text=True,
        timeout=60, check=False, env={**os.environ, **(env or {})},
    )  # fmt: skip


def test_the_health_check_follows_shoal_healthy(served: str) -> None:
    healthy = _health("--url", served)
    assert healthy.returncode == 0, healthy.stdout + healthy.stderr

    metrics.set_dependency_up("redis", False)
    down = _health("--url", served)
    assert down.returncode == 1
    assert "unhealthy" in down.stdout

    metrics.set_dependency_up("redis", True)
    assert _health("--url", served).returncode == 0


def test_the_health_check_reads_the_port_from_the_settings(served: str) -> None:
    port = served.rsplit(":", 1)[1].split("/")[0]

    assert _health(env={"SHOAL_METRICS_PORT": port}).returncode == 0
    assert _health(env={"SHOAL_METRICS_PORT": "0"}).returncode == 2  # a free port cannot be found again
    nothing = _health("--url", f"http://127.0.0.1:{free_port()}/metrics")
    assert nothing.returncode == 1
    assert "does not answer" in nothing.stdout


# --- Under a real supervisord: the URL reaches `shoal status --json` -----------------------------

PROBE = textwrap.dedent(
    """
    import threading
    from utils.cli.main import stop_event_on_signals
    from utils.observability.metrics import record_page, start_metrics_server, stop_metrics_server
    from utils.config.settings import Settings

    stop = stop_event_on_signals()
    start_metrics_server(Settings.load(), "crawler")
    record_page("link", 200)
    stop.wait()
    stop_metrics_server()
    """
)

CONFIG = """\
[unix_http_server]
file={run_dir}/supervisor.sock
[supervisord]
logfile={run_dir}/supervisord.log
pidfile={run_dir}/supervisord.pid
childlogdir={run_dir}
[rpcinterface:supervisor]
supervisor.rpcinterface_factory = supervisor.rpcinterface:make_main_rpcinterface
[supervisorctl]
serverurl=unix://{run_dir}/supervisor.sock
[group:shoal]
programs=crawler
[program:crawler]
command={python} {probe}
process_name=crawler-%(process_num)02d
numprocs=2
directory={repo}
environment=SHOAL_RUN_DIR='{run_root}'
startsecs=1
stopsignal=TERM
stopwaitsecs=10
redirect_stderr=true
stdout_logfile={run_dir}/%(program_name)s-%(process_num)02d.log
"""


@pytest.fixture
def node(tmp_path: Path) -> Iterator[dict[str, Any]]:
    """A node run dir whose supervisord runs two probe processes that serve metrics."""
    run_root = tmp_path / "run"
    run_dir = run_root / "probe"
    run_dir.mkdir(parents=True)
    probe = tmp_path / "probe.py"
    probe.write_text(PROBE)
    config = run_dir / "supervisord.conf"
    config.write_text(CONFIG.format(run_dir=run_dir, run_root=run_root, python=shlex.quote(sys.executable),
                                  probe=shlex.quote(str(probe)), repo=REPO))  # a checkout's path may hold spaces
    supervisord = Path(sys.executable).parent / "supervisord"
    subprocess.run([str(supervisord), "-c", str(config)], cwd=REPO, check=True, timeout=30)
    options = ["-s", f"RUN_DIR={run_root}"]
    yield {"options": options, "run_dir": run_dir, "config": config}
    subprocess.run([sys.executable, "-m", "utils.cli.main", *options, "down", "--node", "probe"], cwd=REPO,
                   capture_output=True, timeout=100, check=False)  # fmt: skip


def _status(options: list[str]) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-m", "utils.cli.main", *options, "status", "--json", "--node", "probe"], cwd=REPO,
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    report: dict[str, Any] = json.loads(done.stdout)
    return report


def _urls(options: list[str]) -> dict[str, tuple[int, str | None]] | None:
    """{process: (pid, metrics_url)} once both probes run and published, else None."""
    rows = {row["name"]: (row["pid"], row["metrics_url"]) for row in _status(options)["processes"]}
    return rows if len(rows) == 2 and all(url for _pid, url in rows.values()) else None


@pytest.mark.timeout(120)
def test_status_json_gives_each_process_its_metrics_url(node: dict[str, Any]) -> None:
    options = node["options"]

    urls = wait_until(lambda: _urls(options), 30, 0.3, "the probes never published their URLs")

    assert sorted(urls) == ["shoal:crawler-00", "shoal:crawler-01"]
    assert len({url for _pid, url in urls.values()}) == 2  # port 0: each process its own free port
    for _pid, url in urls.values():
        assert url is not None
        assert scrape(url)[("shoal_pages_total", (("spiderid", "link"), ("status", "200")))] == 1

    old_pid, old_url = urls["shoal:crawler-01"]
    supervisorctl = Path(sys.executable).parent / "supervisorctl"
    subprocess.run([str(supervisorctl), "-c", str(node["config"]), "stop", "shoal:crawler-01"], check=True, timeout=60)
    stopped = {row["name"]: row for row in _status(options)["processes"]}["shoal:crawler-01"]
    assert stopped["metrics_url"] is None  # stopped gracefully: its file is gone, no URL shown
    assert not (node["run_dir"] / "metrics" / "crawler-01.json").exists()

    subprocess.run([str(supervisorctl), "-c", str(node["config"]), "start", "shoal:crawler-01"], check=True, timeout=60)
    again = wait_until(lambda: _urls(options), 30, 0.3, "the restarted probe never published its URL")
    assert again["shoal:crawler-01"][0] != old_pid
    assert again["shoal:crawler-01"][1] != old_url
