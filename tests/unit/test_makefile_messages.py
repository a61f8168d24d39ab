"""Where `make run` cannot install Debian's packages, one line says what to do (issue 36)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
MISSING = "shoal-no-such-package"


def _make(bin_dir: Path, *variables: str) -> subprocess.CompletedProcess[str]:
    """`make debian-packages` with only `bin_dir` on PATH (what a machine without some tools has)."""
    argv = [shutil.which("make") or "make", "--no-print-directory", "debian-packages",
            f"PACKAGES={MISSING} redis-server", *variables]  # redis-server is installed: not named
    return subprocess.run(argv, cwd=REPO, env={"PATH": str(bin_dir)}, capture_output=True, text=True, check=False)


def _bin_with(tmp_path: Path, *tools: str) -> Path:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("dpkg", "dpkg-query", "id", *tools):
        found = shutil.which(tool)
        assert found, f"{tool} is not installed"
        (bin_dir / tool).symlink_to(found)
    return bin_dir


def test_without_apt_get_one_line_names_the_packages(tmp_path: Path) -> None:
    done = _make(_bin_with(tmp_path))
    assert done.returncode != 0
    assert done.stdout.strip() == (f"Shoal needs Debian's packages {MISSING} (no apt-get here: install their "
                                   "equivalents, then run make again)")  # fmt: skip


def test_a_user_without_sudo_is_told_the_command_to_run_as_root(tmp_path: Path) -> None:
    done = _make(_bin_with(tmp_path, "apt-get"), "SUDO=sudo")  # not root: make would need sudo, which is missing
    assert done.returncode != 0
    assert done.stdout.strip() == (f"Shoal needs Debian's packages {MISSING}: as root run 'apt-get install -y "
                                   f"{MISSING}' (or install sudo), then run make again")  # fmt: skip
