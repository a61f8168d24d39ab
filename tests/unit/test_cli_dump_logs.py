"""`shoal dump` prints records on stdout for a pipe: its own log lines (a kafka-python warning on a
busy machine) go to stderr, never among the records."""

from __future__ import annotations

import subprocess
import sys

SCRIPT = """
import logging, sys
from utils.cli.main import DATA_ON_STDOUT
from utils.config.log import setup_logging
from utils.config.settings import Settings
setup_logging(Settings.load(environ={}), "dump", stdout_is_data="dump" in DATA_ON_STDOUT)
print('{"url": "http://127.0.0.1/"}')
logging.getLogger("kafka.client").warning("event loop blocked")
logging.shutdown()
"""


def test_dump_logs_go_to_stderr_and_stdout_holds_only_records() -> None:
    done = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout.splitlines() == ['{"url": "http://127.0.0.1/"}']
    assert "event loop blocked" in done.stderr


def test_other_commands_keep_logging_to_stdout() -> None:
    script = SCRIPT.replace('"dump" in DATA_ON_STDOUT', '"crawl" in DATA_ON_STDOUT')
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True)
    assert "event loop blocked" in done.stdout
