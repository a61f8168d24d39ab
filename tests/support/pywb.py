"""pywb, the replay tool the archive is checked with, in a venv of its own.

pywb pins redis 2.10 and an old gevent/greenlet that Shoal's venv cannot take (redis>=5, Playwright's
greenlet>=3): `make install-test` builds `.shoal/pywb` from PyPI with PYWB_VERSION, and this fixture
builds it the same way when it is missing, so a test never skips for want of it.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

from tests.support.cluster import REPO
from tests.support.services import wait_until
from utils.services import free_port

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


@contextmanager
def replaying(root: Path, warcs: list[Path]) -> Iterator[Callable[[str, str], httpx.Response]]:
    """pywb's wayback serving a collection of `warcs` (and their own CDXJ) on a free port, stopped by pid
    afterwards; yields `replay(url, warc_date)`: pywb's answer for that capture, unrewritten (`id_`)."""
    collection(root, "shoal", warcs)
    port = free_port()
    server = subprocess.Popen([str(wayback()), "-p", str(port), "-b", "127.0.0.1"], cwd=root,
                              stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)  # fmt: skip

    def replay(url: str, warc_date: str) -> httpx.Response:
        stamp = warc_date[:19].replace("-", "").replace(":", "").replace("T", "")
        address = f"http://127.0.0.1:{port}/shoal/{stamp}id_/{url}"
        wait_until(lambda: _answers(address), 60, message=f"pywb never answered {address}")
        return httpx.get(address, timeout=10)

    try:
        yield replay
    finally:
        server.terminate()
        server.wait(10)


def _answers(url: str) -> bool:
    try:
        return httpx.get(url, timeout=5).status_code < 500
    except httpx.HTTPError:
        return False
