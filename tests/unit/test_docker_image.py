"""The Dockerfile's install step, run without Docker: docker/install.sh on a copy of exactly what the
build stage copies, into a fresh virtual environment (pip uses this machine's index and wheel cache).

Slow (a full install of Shoal and its dependencies, a minute or two); no service is needed.
"""

from __future__ import annotations

import fnmatch
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from utils.cli.main import COMMANDS

pytestmark = [pytest.mark.timeout(900)]

PACKAGE_DATA = ("*.json", "*.lua", "*.html", "*.js", "*.css", "*.conf")  # pyproject's package-data

REPO = Path(__file__).resolve().parents[2]
DOCKER = REPO / "docker"


def build_stage_copies() -> list[tuple[list[str], str]]:
    """(sources, destination) of each COPY of the build stage whose destination is under WORKDIR."""
    text = re.sub(r"\\\n", " ", (DOCKER / "Dockerfile").read_text())
    copies: list[tuple[list[str], str]] = []
    stages = 0
    for line in (raw.strip() for raw in text.splitlines()):
        words = line.split()
        if not words or line.startswith("#"):
            continue
        stages += words[0] == "FROM"
        if stages == 1 and words[0] == "COPY" and not words[-1].startswith("/"):
            copies.append((words[1:-1], words[-1]))
    return copies


def ignored() -> list[str]:
    lines = (DOCKER / "Dockerfile.dockerignore").read_text().splitlines()
    return [line.strip().removeprefix("**/") for line in lines if line.strip() and not line.startswith("#")]


def copy_context(target: Path) -> None:
    """What `COPY` puts in /src, with the .dockerignore patterns left out, as BuildKit does."""
    patterns = ignored()
    skip = shutil.ignore_patterns(*patterns)
    for sources, destination in build_stage_copies():
        for source in sources:
            src = REPO / source
            dest = target / destination / (src.name if destination.endswith("/") else "")
            if src.is_dir():
                shutil.copytree(src, dest, ignore=skip)
            elif not any(fnmatch.fnmatch(src.name, pattern) for pattern in patterns):
                dest.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(src, dest)


def run(argv: list[str], cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("SHOAL_", "VIRTUAL_ENV", "PYTHONPATH"))}
    return subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=840, check=False,
                          env={**clean, **env})  # fmt: skip


def test_the_image_installs_with_the_uv_the_makefile_pins() -> None:
    pinned = re.search(r"^UV_VERSION := (\S+)$", (REPO / "Makefile").read_text(), re.MULTILINE)
    assert pinned is not None
    assert f"'uv=={pinned.group(1)}'" in (DOCKER / "install.sh").read_text()


@pytest.mark.slow
def test_the_install_step_yields_a_working_shoal_outside_the_source_tree(tmp_path: Path) -> None:
    source = tmp_path / "src"
    copy_context(source)
    assert sorted(p.name for p in source.iterdir()) == sorted(
        ["pyproject.toml", "README.md", "utils", "kafka_monitor", "crawler", "redis_monitor", "rest", "sink",
         "revisit", "warc"]
    )
    assert not list(source.rglob("__pycache__"))
    data = [p.relative_to(source) for pattern in PACKAGE_DATA for p in source.rglob(pattern) if p.parent != source]
    assert data  # before the install: pip builds in the tree
    venv = tmp_path / "opt-shoal"

    installed = run(["sh", str(DOCKER / "install.sh"), str(venv), str(source)], tmp_path, PYTHON=sys.executable)

    assert installed.returncode == 0, installed.stdout + installed.stderr
    python = str(venv / "bin" / "python")
    located = run([python, "-c", "import utils, crawler; print(utils.__file__); print(crawler.__file__)"], tmp_path)
    assert all(line.startswith(str(venv)) for line in located.stdout.split()), located.stdout  # not the checkout
    assert run([python, "-m", "pip", "check"], tmp_path).returncode == 0
    site = Path(run([python, "-c", "import utils, pathlib; print(pathlib.Path(utils.__file__).parents[1])"],
                    tmp_path).stdout.strip())  # fmt: skip
    assert [str(path) for path in data if not (site / path).is_file()] == []
    helped = run([str(venv / "bin" / "shoal"), "--help"], tmp_path)
    assert all(name in helped.stdout for name in COMMANDS)
    health = run([python, "-m", "utils.observability.metrics.health", "--help"], tmp_path)
    assert health.returncode == 0, health.stderr
