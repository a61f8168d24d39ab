"""No logging call's `extra=` key shadows a field of the log record or of the JSON line: Python's
logging refuses a LogRecord attribute only at the moment the line is logged (KeyError), and silently
lets a key like "level" replace the formatter's own, so a search for WARNING misses the line."""

from __future__ import annotations

import ast
import logging
from pathlib import Path

from utils.config.log import _RESERVED, OWN_FIELDS, JsonFormatter

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("utils", "kafka_monitor", "redis_monitor", "crawler", "rest", "sink", "revisit", "warc", "bench")
LOG_METHODS = {"debug", "info", "warning", "warn", "error", "exception", "critical", "fatal", "log"}
FORBIDDEN = _RESERVED | OWN_FIELDS


def extra_keys(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, key) of every constant key in a dict literal passed as `extra=` to a logging method."""
    found = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr in LOG_METHODS):  # fmt: skip
            continue
        for keyword in node.keywords:
            if keyword.arg == "extra" and isinstance(keyword.value, ast.Dict):
                found += [(k.lineno, k.value) for k in keyword.value.keys
                          if isinstance(k, ast.Constant) and isinstance(k.value, str)]  # fmt: skip
    return found


def sources() -> list[Path]:
    return [path for package in PACKAGES for path in sorted((ROOT / package).rglob("*.py"))]


def test_no_extra_key_shadows_a_record_attribute_or_a_json_field() -> None:
    checked, shadowing = 0, []
    for path in sources():
        for line, key in extra_keys(ast.parse(path.read_text(), str(path))):
            checked += 1
            if key in FORBIDDEN:
                shadowing.append(f"{path.relative_to(ROOT)}:{line}: {key!r}")
    assert checked > 200  # the walk does find the project's logging calls
    assert not shadowing, "extra= keys that shadow a log record's own fields:\n" + "\n".join(shadowing)


def test_the_walk_finds_a_shadowing_key() -> None:
    code = 'log.warning("Block detected", extra={"domain": "a", "level": 1})\nlogger.info("x", extra={"msg": 2})'
    assert [key for _, key in extra_keys(ast.parse(code))] == ["domain", "level", "msg"]
    assert {"level", "msg"} <= FORBIDDEN


def test_the_json_line_keeps_its_own_fields() -> None:
    record = logging.makeLogRecord({"msg": "Block detected", "levelname": "WARNING", "name": "crawler.ladder"})
    line = JsonFormatter("crawler").format(record)
    assert all(f'"{field}":' in line for field in OWN_FIELDS - {"exception"})
