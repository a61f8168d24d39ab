"""Bytes -> message: JSON parsed, then its values checked, before any schema or plugin sees it.

ujson reads what no later step can carry: `1e400` as infinity, `NaN`, lone surrogates (`"\\ud800"`,
which no UTF-8 encoder takes), integers of up to 4,300 digits and nesting to 1,024 levels (Python's
json, which reads requests again downstream, fails with RecursionError near 1,000; a copy of the
message for an answer recursed the same way, issue 30). The checks look at the parsed values, not
at the bytes, so no spelling of a number (`1e400`, `1E+400`, 400 digits) slips past.
One module for every reader of wire messages (the kafka monitor, the redis monitors' jobs).
"""

from __future__ import annotations

from typing import Any

import ujson

from utils.config.errors import InvalidMessage

NOT_JSON = "Unparseable JSON Received"  # Scrapy Cluster's log event and answer
MAX_DEPTH = 64  # levels of nested arrays and objects a message may have (a request needs ~4)
INT_LIMIT = 2**64  # integers must lie strictly between -INT_LIMIT and INT_LIMIT (64-bit readers)
PATH_SHOWN = 8  # segments of the offending value's path named in a refusal


def loads(data: bytes | str | None) -> Any:
    """The parsed message; InvalidMessage(NOT_JSON, cause) when it is not JSON or holds what `refusal` refuses."""
    value = parse(data)
    reason = refusal(value)
    if reason is not None:
        raise InvalidMessage(NOT_JSON, cause=reason)
    return value


def parse(data: bytes | str | None) -> Any:
    """JSON as ujson reads it, values unchecked (see `loads`); InvalidMessage(NOT_JSON) when it is not JSON."""
    if data is None:
        raise InvalidMessage(NOT_JSON, cause="empty message")
    try:
        return ujson.loads(data)
    except (ValueError, OverflowError, RecursionError) as exc:  # JSONDecodeError, UnicodeDecodeError are ValueErrors
        raise InvalidMessage(NOT_JSON, cause=str(exc)[:200]) from None


def names(value: Any) -> dict[str, str]:
    """The `uuid` and `appid` of a parsed message when they are plain strings (what an answer may echo
    even when the rest of the message is refused)."""
    if not isinstance(value, dict):
        return {}
    found = {key: value.get(key) for key in ("uuid", "appid")}
    return {k: v for k, v in found.items() if isinstance(v, str) and len(v) <= 100 and refusal(v) is None}


def refusal(value: Any) -> str | None:
    """Why a parsed value cannot travel (`attrs.x: infinite or NaN number`), or None.

    Recursion is bounded by MAX_DEPTH, so it cannot overflow the stack however deep the input."""
    found = _walk(value, 0)
    if found is None:
        return None
    reason, path = found
    path.reverse()
    where = ".".join(_segment(p) for p in path[:PATH_SHOWN]) + (".…" if len(path) > PATH_SHOWN else "")
    return f"{where}: {reason}" if where else reason


def _walk(value: Any, depth: int) -> tuple[str, list[Any]] | None:
    kind = type(value)
    if kind is str:
        return None if value.isascii() or _encodable(value) else ("lone surrogate in a string", [])
    if kind is float:
        return None if value - value == 0.0 else (f"non-finite number ({value}): JSON numbers must be finite", [])
    if kind is int:
        return None if -INT_LIMIT < value < INT_LIMIT else ("integer beyond 64 bits", [])
    if kind is dict:
        if depth >= MAX_DEPTH:
            return (f"nested deeper than {MAX_DEPTH} levels", [])
        for key, item in value.items():
            found = _walk(key, MAX_DEPTH) if not key.isascii() else None  # keys are str: only encodability
            found = found or _walk(item, depth + 1)
            if found is not None:
                found[1].append(key)
                return found
    elif kind is list:
        if depth >= MAX_DEPTH:
            return (f"nested deeper than {MAX_DEPTH} levels", [])
        for index, item in enumerate(value):
            found = _walk(item, depth + 1)
            if found is not None:
                found[1].append(index)
                return found
    return None


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _segment(part: Any) -> str:
    text = part if isinstance(part, str) else str(part)
    return (text if _encodable(text) else text.encode("utf-8", "backslashreplace").decode())[:60]
