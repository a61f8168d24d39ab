"""`shoal up`, `status` and `down` running a real node (supervisord and the three services) on free ports.

The components are other people's work in progress: only the services must be RUNNING; the
crawler processes must be listed (any state), and `down` must leave no process of the node.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.services import wait_until
from utils.services import free_ports
from utils.services.process import port_in_use

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
SERVICES = ("redis", "zookeeper", "kafka")


def _shoal(options: list[str], *command: str) -> subprocess.CompletedProcess[str]:
    """Run the CLI as a user would, from the repository root."""
    return subprocess.run(
        [sys.executable, "-m", "utils.cli.main", *options, *command], cwd=REPO, capture_output=True, text=True,
        timeout=100, check=False,
    )  # fmt: skip


def _gone(pid: int) -> bool:
    """Whether `pid` no longer runs (a zombie left for a non-reaping init counts as gone)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0] == "Z"
    except OSError:
        return True


def _pids_mentioning(text: str) -> list[int]:
    """Live processes whose command line contains `text` (the node's run dir)."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if entry.name.isdigit() and text in cmdline and not _gone(int(entry.name)):
            found.append(int(entry.name))
    return found


@pytest.fixture
def node(tmp_path: Path) -> Iterator[dict[str, Any]]:
    """The global options of a node on free ports in a tmp run dir; brought down whatever happens."""
    redis, kafka, zookeeper, rest = free_ports(4)
    run_dir = tmp_path / "run"
    options = [
        "-s", f"REDIS_PORT={redis}", "-s", f"KAFKA_HOSTS=127.0.0.1:{kafka}",
        "-s", f"ZOOKEEPER_HOSTS=127.0.0.1:{zookeeper}", "-s", f"REST_PORT={rest}", "-s", f"RUN_DIR={run_dir}",
    ]  # fmt: skip
    ports = {"redis": redis, "kafka": kafka, "zookeeper": zookeeper, "rest": rest}
    yield {"options": options, "ports": ports, "run_dir": run_dir / "default"}
    _shoal(options, "down")


def _status(options: list[str]) -> dict[str, Any]:
    done = _shoal(options, "status", "--json")
    report: dict[str, Any] = json.loads(done.stdout)
    assert done.returncode == (0 if report["running"] else 1), done.stderr
    return report


def _services_running(options: list[str]) -> dict[str, Any] | None:
    """The status report once every service program is RUNNING (startsecs has passed), else None."""
    report = _status(options)
    states = {p["name"]: p["state"] for p in report["processes"]}
    return report if all(states.get(f"services:{name}") == "RUNNING" for name in SERVICES) else None


@pytest.mark.timeout(120)
def test_up_status_down_runs_the_node_and_leaves_nothing(node: dict[str, Any]) -> None:
    options, ports = node["options"], node["ports"]

    up = _shoal(options, "up", "--crawlers", "2", "--renderers", "1")
    assert up.returncode == 0, up.stdout + up.stderr
    for name in ("redis", "zookeeper", "kafka", "rest"):
        assert f"127.0.0.1:{ports[name]}" in up.stdout

    report = wait_until(lambda: _services_running(options), 20, 0.5, "services never all RUNNING")
    processes = {p["name"]: p for p in report["processes"]}
    assert all(processes[f"services:{name}"]["pid"] > 0 for name in SERVICES)
    assert sorted(name for name in processes if "crawler" in name) == ["shoal:crawler-00", "shoal:crawler-01"]
    assert processes["shoal:renderer-00"]["state"] in ("STARTING", "RUNNING")  # a render spider, on request
    assert report["services"] == {**{name: f"127.0.0.1:{port}" for name, port in ports.items()},
                                  "postgres": "127.0.0.1:5432"}  # the sink's DSN, not started here

    again = _shoal(options, "up", "--crawlers", "2")
    assert again.returncode == 0
    assert "already running" in again.stdout

    pids = [report["supervisord_pid"], *(p["pid"] for p in _status(options)["processes"] if p["pid"])]
    down = _shoal(options, "down")
    assert down.returncode == 0, down.stdout + down.stderr
    assert "stopped services:redis" in down.stdout
    assert [pid for pid in pids if not _gone(pid)] == []
    assert _pids_mentioning(str(node["run_dir"])) == []
    assert not any(port_in_use("127.0.0.1", ports[name]) for name in SERVICES)
    assert _status(options)["running"] is False
    assert "not running" in _shoal(options, "down").stdout
