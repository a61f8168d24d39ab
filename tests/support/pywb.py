"""pywb, the replay tool the archive is checked with, in a venv of its own.

pywb pins redis 2.10 and an old gevent/greenlet that Shoal's venv cannot take (redis>=5, Playwright's
greenlet>=3): `make install-test` builds `.shoal/pywb` from PyPI with PYWB_VERSION, and this fixture
builds it the same way when it is missing, so a test never skips for want of it.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from tests.support.cluster import REPO

PYWB_VERSION = "2.10.0"  # the Makefile's PYWB_VERSION
VENV = REPO / ".shoal" / "pywb"


def wayback() -> Path:
    """The `wayback` script of pywb's venv, built first if it is not there."""
    script = VENV / "bin" / "wayback"
    if not script.exists():
        python = shutil.which("python3.11") or sys.executable
        subprocess.run([python, "-m", "venv", "--clear", str(VENV)], check=True)
        subprocess.run([str(VENV / "bin" / "pip"), "install", "--quiet", f"pywb=={PYWB_VERSION}"], check=True,
                       timeout=600)  # fmt: skip
    return script


def collection(root: Path, name: str, warcs: list[Path]) -> Path:
    """A pywb collection under `root`: the WARC files in `archive/`, their own CDXJ files merged (sorted)
    into `indexes/index.cdxj` — the indexes the warc component wrote, not ones pywb makes."""
    base = root / "collections" / name
    (base / "archive").mkdir(parents=True)
    (base / "indexes").mkdir()
    lines: list[str] = []
    for warc in warcs:
        shutil.copy(warc, base / "archive" / warc.name)
        lines += warc.with_name(warc.name + ".cdxj").read_text().splitlines()
    (base / "indexes" / "index.cdxj").write_text("".join(line + "\n" for line in sorted(lines)))
    return base
