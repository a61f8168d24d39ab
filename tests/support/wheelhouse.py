"""Shoal's dependencies as wheels in one local directory, downloaded once per machine and pyproject.toml.

The tests that make a venv as a user or the image would (`make run` in tests/e2e/test_first_run.py,
docker/install.sh in tests/unit/test_docker_image.py) hand it to pip with the index turned off: the
same install from the same wheels, without four downloads of them per run (through this machine's
proxy, one took 11 minutes and 17 CPU seconds; even the index pages alone, asked for each of the ~110
packages, took minutes). It is complete for its pyproject.toml: filling it resolves every dependency
on the index, so a dependency the index lacks still fails, here. A lock keeps the xdist workers from
filling it twice at once.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

from tests.support.cluster import REPO

DOWNLOAD_TIMEOUT = 900  # seconds: every wheel of Shoal's dependencies from PyPI on a cold machine
_COMPLETE = ".complete"


def _cache_root() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "shoal"


def wheelhouse() -> Path:
    """The directory of wheels for this pyproject.toml (with the `s3` extra, pip, setuptools), filled
    on first use; AssertionError with pip's output when the download fails."""
    digest = hashlib.sha256((REPO / "pyproject.toml").read_bytes()).hexdigest()[:12]
    house = _cache_root() / f"wheelhouse-py{sys.version_info.major}{sys.version_info.minor}-{digest}"
    house.parent.mkdir(parents=True, exist_ok=True)
    with (house.parent / f"{house.name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (house / _COMPLETE).exists():
            _fill(house)
    return house


def _fill(house: Path) -> None:
    partial = house.with_name(house.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    argv = [sys.executable, "-m", "pip", "download", "--quiet", "--dest", str(partial),
            f"{REPO}[s3]", "pip", "setuptools", "wheel"]  # fmt: skip
    done = subprocess.run(argv, capture_output=True, text=True, timeout=DOWNLOAD_TIMEOUT, check=False)
    assert done.returncode == 0, f"filling the wheelhouse failed:\n{done.stdout}{done.stderr}"
    for built in partial.glob("shoal-*"):  # the checkout itself: always installed from its source
        built.unlink()
    (partial / _COMPLETE).touch()
    shutil.rmtree(house, ignore_errors=True)
    partial.rename(house)


def pip_environ(house: Path) -> dict[str, str]:
    """The variables that make pip install from `house` alone."""
    return {"PIP_FIND_LINKS": str(house), "PIP_NO_INDEX": "1"}
