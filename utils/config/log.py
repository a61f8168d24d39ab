"""Structured logging: one JSON object per line, installed once per process by the CLI.

Fields passed through `extra=` become top-level keys, next to `timestamp` (UTC, Scrapy Cluster's
`%Y-%m-%dT%H:%M:%S.%fZ`), `level`, `logger` and `message`, so ELK dashboards built for Scrapy
Cluster's log events keep working.

High-volume lines (the crawler's two per-page events) may pass `extra=PER_PAGE`: they wait in the
handler's buffer for at most FLUSH_EVERY seconds instead of costing a write each; any other line
flushes the buffer at once, so ordering holds and no other event is ever delayed.
"""

from __future__ import annotations

import atexit
import io
import logging
import logging.handlers
import re
import sys
import threading
import time
import traceback
import weakref
from pathlib import Path
from typing import Any, TextIO

import ujson

from utils.config.settings import Settings

# Attributes every LogRecord has; anything else on a record came from `extra=`.
_RESERVED = set(vars(logging.makeLogRecord({}))) | {"message", "asctime", "taskName"}
# Keys the JSON formatter writes itself: an `extra=` key of one of these names would replace it (a
# "level" extra once hid every block warning from a search for WARNING); tests/unit/test_log_extras.py.
OWN_FIELDS = frozenset({"timestamp", "level", "logger", "message", "component", "exception"})

FLUSH_EVERY = 0.1  # seconds a PER_PAGE line may wait in the buffer (lost on SIGKILL at most)
BUFFER_BYTES = 256 * 1024  # the buffer is written when this full, whatever the time
_BUFFERED = "_buffered"  # record attribute marking a line that may wait (never output: leading "_")
PER_PAGE: dict[str, bool] = {_BUFFERED: True}  # merge into `extra=` of per-page lines


# `scheme://user:password@` in any text: the userinfo up to the last `@` before the host (as urlsplit
# reads it), JSON escapes included. Logs never show it, wherever a URL appears (issue 30).
_USERINFO = re.compile(r"\b([a-zA-Z][a-zA-Z0-9+.-]*://)(?:[^\s/?#\"\\]|\\.)*@")


def redact_userinfo(text: str) -> str:
    """`http://alice:secret@host/` -> `http://***@host/` everywhere in `text` (a log line)."""
    return _USERINFO.sub(r"\1***@", text) if "@" in text else text


class TextFormatter(logging.Formatter):
    """The plain formatter, without URL credentials."""

    def format(self, record: logging.LogRecord) -> str:
        return redact_userinfo(super().format(record))


class JsonFormatter(logging.Formatter):
    """Formats a record as a single JSON line with its extras as top-level keys."""

    def __init__(self, component: str = "") -> None:
        super().__init__()
        self.component = component
        self._second = -1  # the whole second of the last line, and its formatted text
        self._second_text = ""

    def stamp(self, created: float) -> str:
        """`%Y-%m-%dT%H:%M:%S.%fZ` in UTC; the date part is formatted once a second."""
        second = int(created)
        if second != self._second:
            self._second, self._second_text = second, time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second))
        return f"{self._second_text}.{min(round((created - second) * 1e6), 999999):06d}Z"

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "timestamp": self.stamp(record.created),
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
        line = ujson.dumps(entry, ensure_ascii=False, escape_forward_slashes=False, default=str, reject_bytes=False)
        return redact_userinfo(line)


class BufferedStreamHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """A stream handler whose PER_PAGE lines may wait up to FLUSH_EVERY seconds in the buffer.

    One write syscall per line made the crawler's two per-page events cost ~0.1 ms of CPU a page
    (bench/crawl_vs_scrapy.py A/B runs). Every other line, WARNING and above, exit and close flush.
    """

    def __init__(self, stream: TextIO, shares_fd_with: TextIO | None = None) -> None:
        super().__init__(stream)
        self.shares_fd_with = shares_fd_with  # sys.stdout when `stream` writes to its fd: flushed first
        self.pending = False
        _LIVE.add(self)
        _start_flusher()

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self.stream.write(self.format(record) + self.terminator)
        except RecursionError:
            raise
        except Exception:
            self.handleError(record)
            return
        if getattr(record, _BUFFERED, False) and record.levelno < logging.WARNING:
            self.pending = True
            if not _WAITING.is_set():
                _WAITING.set()
        else:
            self.flush()

    def flush(self) -> None:
        with self.lock:  # type: ignore[union-attr]  # emit runs under it too: no line is left pending unseen
            self.pending = False
            if self.shares_fd_with is not None:
                self.shares_fd_with.flush()  # what the process printed before this line comes out first
            if self.stream and hasattr(self.stream, "flush"):
                self.stream.flush()


_LIVE: weakref.WeakSet[BufferedStreamHandler] = weakref.WeakSet()
_WAITING = threading.Event()  # a PER_PAGE line waits: the flusher sleeps on this while none does
_flusher: list[threading.Thread] = []


def _start_flusher() -> None:
    """One daemon thread per process writes what waited; exit flushes the rest (Scrapy's logging
    dictConfig removes handlers from logging.shutdown's list, so it is not relied on)."""
    if _flusher:
        return
    thread = threading.Thread(target=_flush_periodically, name="log-flush", daemon=True)
    _flusher.append(thread)
    thread.start()
    atexit.register(_flush_all)


def _flush_periodically() -> None:
    """Blocks while no line waits: waking every FLUSH_EVERY cost each idle process 0.1 % of a core
    (issue 37). Cleared before the flush, so a line buffered during it wakes the next round."""
    while True:
        _WAITING.wait()
        time.sleep(FLUSH_EVERY)
        _WAITING.clear()
        _flush_all(pending_only=True)


def _flush_all(pending_only: bool = False) -> None:
    for handler in list(_LIVE):
        if handler.pending or not pending_only:
            try:
                handler.flush()
            except (ValueError, OSError):  # its stream was closed by its owner
                _LIVE.discard(handler)


def stdout_stream() -> TextIO:
    """sys.stdout, with a buffer of its own when it is the process' real stdout (PYTHONUNBUFFERED
    makes that one write-through: one syscall per line)."""
    stream: TextIO = sys.stdout
    if sys.__stdout__ is None or stream is not sys.__stdout__:
        return stream  # redirected (tests, benchmarks): used as it is
    try:
        fd = stream.fileno()
    except (AttributeError, OSError, io.UnsupportedOperation):
        return stream
    stream.flush()
    raw = open(fd, "wb", buffering=0, closefd=False)  # noqa: SIM115 - lives as long as the process
    return io.TextIOWrapper(io.BufferedWriter(raw, BUFFER_BYTES), encoding="utf-8", errors="backslashreplace")


def setup_logging(settings: Settings, component: str = "", stdout_is_data: bool = False) -> None:
    """Install the one handler of this process on the root logger. A command whose stdout is its
    output (`shoal dump`) logs to stderr instead, so a log line never lands among its records."""
    handler: logging.Handler
    if settings.get_bool("LOG_STDOUT") and stdout_is_data:
        handler = BufferedStreamHandler(sys.stderr)
    elif settings.get_bool("LOG_STDOUT"):
        stream = stdout_stream()
        handler = BufferedStreamHandler(stream, None if stream is sys.stdout else sys.stdout)
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
        handler.setFormatter(TextFormatter("%(asctime)s [%(name)s] %(levelname)s: %(message)s"))
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(settings.get_str("LOG_LEVEL").upper())
    # Record attributes no formatter here shows; each costs a lookup per line (logging HOWTO, "Optimization").
    logging.logThreads = logging.logProcesses = logging.logMultiprocessing = False
    logging._srcfile = None  # no caller frame walk: file and line are not logged
    for noisy in ("kafka", "kazoo", "urllib3"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
