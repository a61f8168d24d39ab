"""utils.config.log's buffered handler: per-page lines may wait ≤ FLUSH_EVERY, every other line goes out at once."""

from __future__ import annotations

import io
import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.cluster import REPO
from tests.support.services import wait_until
from utils.config.log import PER_PAGE, BufferedStreamHandler, JsonFormatter


@pytest.fixture
def logged(tmp_path: Path) -> tuple[logging.Logger, Path]:
    path = tmp_path / "out.log"
    stream = io.TextIOWrapper(io.BufferedWriter(io.FileIO(path, "w"), 1 << 16), encoding="utf-8")
    handler = BufferedStreamHandler(stream)
    handler.setFormatter(JsonFormatter("crawl"))
    logger = logging.getLogger("test.log_buffer")
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False
    yield logger, path
    logger.removeHandler(handler)
    handler.close()
    stream.close()


def lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_a_normal_line_flushes_the_per_page_lines_before_it_in_order(logged: tuple[logging.Logger, Path]) -> None:
    logger, path = logged
    logger.info("Scraped page", extra={"url": "u1", **PER_PAGE})
    logger.info("Sent page to Kafka", extra={"url": "u1", **PER_PAGE})
    assert path.read_text() == ""  # still in the buffer
    logger.info("Scheduler opened")
    assert [entry["message"] for entry in lines(path)] == ["Scraped page", "Sent page to Kafka", "Scheduler opened"]
    assert all("_buffered" not in entry for entry in lines(path))  # the marker is never output


def test_a_per_page_line_is_written_within_the_flush_interval(logged: tuple[logging.Logger, Path]) -> None:
    logger, path = logged
    logger.info("Scraped page", extra={"url": "u2", **PER_PAGE})
    wait_until(lambda: path.read_text(), timeout=5, interval=0.01)
    assert lines(path)[0]["url"] == "u2"


def test_a_warning_is_written_at_once_even_when_marked(logged: tuple[logging.Logger, Path]) -> None:
    logger, path = logged
    logger.warning("Page too large for Kafka; sent without body", extra={"url": "u3", **PER_PAGE})
    assert lines(path)[0]["level"] == "WARNING"


SCRIPT = """
import logging
from utils.config.settings import Settings
from utils.config.log import PER_PAGE, setup_logging
setup_logging(Settings.load(environ={}), "crawl")
print("printed first", flush=False)
logging.getLogger("a").info("page one", extra=PER_PAGE)
logging.getLogger("a").info("Scheduler opened")
print("printed last", flush=False)
logging.getLogger("a").info("page two", extra=PER_PAGE)
"""


@pytest.mark.parametrize("unbuffered", ["", "1"])
def test_a_process_stdout_keeps_prints_in_order_and_exit_writes_the_last_lines(unbuffered: str) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SHOAL_") and k != "PYTHONUNBUFFERED"}
    if unbuffered:
        env["PYTHONUNBUFFERED"] = unbuffered
    out = subprocess.run([sys.executable, "-c", SCRIPT], cwd=REPO, env=env, capture_output=True, text=True, check=True)
    texts = [line if not line.startswith("{") else json.loads(line)["message"] for line in out.stdout.splitlines()]
    assert texts == ["printed first", "page one", "Scheduler opened", "printed last", "page two"]
