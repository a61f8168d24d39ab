"""Shapes of the messages Shoal sends on the outbound and dead-letter topics."""

from __future__ import annotations

import time
from typing import Any

import ujson

from utils.config.redact import redact_secrets

RAW_LIMIT = 4096  # characters of an offending message echoed back in an error answer


def server_time() -> int:
    return int(time.time())


def error_answer(raw: Any, message: str, cause: str | None = None) -> dict[str, Any]:
    """API.md's error shape: uuid and appid when the message had them, and the raw message."""
    answer: dict[str, Any] = {"action": "error", "error": {"message": message}, "server_time": server_time()}
    if cause:
        answer["error"]["cause"] = cause
    if isinstance(raw, dict):
        for key in ("uuid", "appid"):
            if isinstance(raw.get(key), str):
                answer[key] = raw[key]
    answer["data"] = _truncate(redact_secrets(raw))
    return answer


def dead_letter(raw: Any, error: str, source: str, **details: Any) -> dict[str, Any]:
    """A dead-letter record: what failed, why, where it came from, and when."""
    return {
        "data": _truncate(redact_secrets(raw)),
        "error": error,
        "source": source,
        "timestamp": time.time(),
        **details,
    }


def _truncate(raw: Any) -> Any:
    if isinstance(raw, bytes | bytearray):
        raw = bytes(raw).decode("utf-8", "replace")
    text = raw if isinstance(raw, str) else ujson.dumps(raw, reject_bytes=False)
    if len(text) <= RAW_LIMIT:
        return raw
    return text[:RAW_LIMIT] + "…"


def encode(message: dict[str, Any]) -> bytes:
    """Outbound messages are JSON with sorted keys (as Scrapy Cluster's)."""
    return ujson.dumps(message, sort_keys=True, ensure_ascii=False, escape_forward_slashes=False).encode()
