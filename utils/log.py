"""Structured logging: one JSON object per line, installed once per process by the CLI.

Fields passed through `extra=` become top-level keys, next to `timestamp` (UTC, Scrapy Cluster's
`%Y-%m-%dT%H:%M:%S.%fZ`), `level`, `logger` and `message`, so ELK dashboards built for Scrapy
Cluster's log events keep working.
"""

from __future__ import annotations

import logging
import logging.handlers
import sys
import traceback
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import ujson

from utils.settings import Settings

# Attributes every LogRecord has; anything else on a record came from `extra=`.
_RESERVED = set(vars(logging.makeLogRecord({}))) | {"message", "asctime", "taskName"}


class JsonFormatter(logging.Formatter):
    """Formats a record as a single JSON line with its extras as top-level keys."""

    def __init__(self, component: str = "") -> None:
        super().__init__()
        self.component = component

    def format(self, record: logging.LogRecord) -> str:
        stamp = datetime.fromtimestamp(record.created, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        entry: dict[str, Any] = {
            "timestamp": stamp,
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        if self.component:
            entry["component"] = self.component
        for key, value in vars(record).items():
            if key not in _RESERVED and not key.startswith("_"):
                entry[key] = value
        if record.exc_info:
            entry["exception"] = "".join(traceback.format_exception(*record.exc_info)).rstrip()
        return ujson.dumps(entry, ensure_ascii=False, default=str, reject_bytes=False)


def setup_logging(settings: Settings, component: str = "") -> None:
    """Install the one handler of this process on the root logger."""
    handler: logging.Handler
    if settings.get_bool("LOG_STDOUT"):
        handler = logging.StreamHandler(sys.stdout)
    else:
        log_dir = Path(settings.get_str("LOG_DIR"))
        log_dir.mkdir(parents=True, exist_ok=True)
        handler = logging.handlers.RotatingFileHandler(
            log_dir / settings.get_str("LOG_FILE"),
            maxBytes=settings.get_int("LOG_MAX_BYTES"),
            backupCount=settings.get_int("LOG_BACKUPS"),
        )
    if settings.get_bool("LOG_JSON"):
        handler.setFormatter(JsonFormatter(component))
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s [%(name)s] %(levelname)s: %(message)s"))
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(settings.get_str("LOG_LEVEL").upper())
    for noisy in ("kafka", "kazoo", "urllib3"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
