"""`make test` and `make test-fast` run pytest in two phases (parallel, then the `serial` tests alone),
pass `K` to both, and fail when either phase fails (docs/operations/tests.md)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
# Each phase's exit status comes from the environment: PARALLEL for the `not serial` phase, SERIAL otherwise.
FAKE_PYTEST = """#!/bin/sh
echo "$*" >> "$CALLS"
case "$*" in *"not serial"*) exit "$PARALLEL";; *) exit "$SERIAL";; esac
"""


# A suite run by `make test K=...` passes its variables down in these: the make under test must not see them.
OUTER_MAKE = ("MAKEFLAGS", "MAKELEVEL", "MFLAGS", "MAKEOVERRIDES", "K", "TEST_WORKERS", "PYTEST_ARGS")


def make(*argv: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """`make` in the checkout, its prerequisites that install or build taken as done (`-o`)."""
    command = [shutil.which("make") or "make", "--no-print-directory", "-o", "install-test", "-o", "helm", *argv]
    clean = {k: v for k, v in (os.environ if env is None else env).items() if k not in OUTER_MAKE}
    return subprocess.run(command, cwd=REPO, env=clean, capture_output=True, text=True, check=False, timeout=60)


def phases(tmp_path: Path, parallel: int, serial: int, *argv: str) -> tuple[int, list[str]]:
    """make test-fast's exit status and the pytest argument lines, pytest replaced by a stub."""
    stub = tmp_path / "pytest"
    stub.write_text(FAKE_PYTEST)
    stub.chmod(0o755)
    calls = tmp_path / "calls"
    env = {"PATH": "/usr/bin:/bin", "CALLS": str(calls), "PARALLEL": str(parallel), "SERIAL": str(serial)}
    done = make("test-fast", f"PYTEST={stub}", *argv, env=env)
    return done.returncode, calls.read_text().splitlines()


def test_the_parallel_phase_runs_on_workers_then_the_serial_tests_alone(tmp_path: Path) -> None:
    status, calls = phases(tmp_path, 0, 0, "TEST_WORKERS=4")
    assert status == 0
    assert len(calls) == 2
    assert calls[0].split()[:2] == ["-n", "4"]
    assert "-m not serial and not slow" in calls[0]
    assert calls[1].split()[:2] == ["-n", "0"]
    assert "-m serial and not slow" in calls[1]


@pytest.mark.parametrize(
    ("parallel", "serial", "passes"),
    [(0, 0, True), (0, 5, True), (5, 0, True), (5, 5, False), (1, 0, False), (0, 1, False), (2, 5, False)],
)
def test_a_failed_phase_fails_make_and_no_test_selected_fails_only_in_both(
    tmp_path: Path, parallel: int, serial: int, passes: bool
) -> None:
    status, calls = phases(tmp_path, parallel, serial)
    assert (status == 0) is passes
    assert len(calls) == 2  # the serial phase runs even after the parallel one failed


def test_k_selects_in_both_phases_and_skips_lint_typecheck_and_docs() -> None:
    planned = make("-n", "test", "K=frontier and not broad").stdout
    runs = [line for line in planned.splitlines() if "-m pytest" in line]
    assert len(runs) == 1  # one shell line: both phases, then their combined status
    assert runs[0].count('-k "frontier and not broad"') == 2
    assert "ruff" not in planned
    assert "mypy" not in planned
    assert "mkdocs" not in planned
    whole = make("-n", "test").stdout
    assert "ruff check" in whole
    assert "mypy" in whole
    assert "mkdocs build" in whole
    assert "--durations=25" in whole
    assert "-k" not in whole.split("-m pytest", 1)[1]
