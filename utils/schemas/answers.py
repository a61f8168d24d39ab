"""Shapes of the messages Shoal sends on the outbound and dead-letter topics.

Building and encoding an answer or a dead letter never raises, whatever the message it is about
(issue 30: an answer that raised stopped a kafka monitor partition for good). What cannot be shown
is left out and said so, and the failure is logged; every text is bounded, so an answer always
fits a Kafka message.
"""

from __future__ import annotations

import json
import logging
import time
from typing import Any

import ujson

from utils.config.redact import redact_secrets

log = logging.getLogger(__name__)

RAW_LIMIT = 4096  # characters of an offending message echoed back in an error answer
TEXT_LIMIT = 1000  # characters of an error message or cause (a schema complaint may quote a long key)
NOT_SHOWN = "(not shown: the message could not be copied for showing)"


def server_time() -> int:
    return int(time.time())


def error_answer(raw: Any, message: str, cause: str | None = None) -> dict[str, Any]:
    """API.md's error shape: uuid and appid when the message had them, and the raw message."""
    answer: dict[str, Any] = {"action": "error", "error": {"message": _clip(message)}, "server_time": server_time()}
    if cause:
        answer["error"]["cause"] = _clip(cause)
    if isinstance(raw, dict):
        for key in ("uuid", "appid"):
            if isinstance(raw.get(key), str):
                answer[key] = _clip(raw[key])
    answer["data"] = shown(raw)
    return answer


def dead_letter(raw: Any, error: str, source: str, **details: Any) -> dict[str, Any]:
    """A dead-letter record: what failed, why, where it came from, and when."""
    return {
        "data": shown(raw),
        "error": _clip(error),
        "source": source,
        "timestamp": time.time(),
        **details,
    }


def shown(raw: Any) -> Any:
    """`raw` as an answer or a dead letter shows it: without credentials, at most RAW_LIMIT characters."""
    try:
        return _truncate(redact_secrets(raw))
    except Exception:  # whatever raw holds: the answer goes out without it
        log.exception("Message could not be copied for an answer or a dead letter")
        return NOT_SHOWN


def _truncate(raw: Any) -> Any:
    if isinstance(raw, bytes | bytearray):
        raw = bytes(raw).decode("utf-8", "replace")
    text = raw if isinstance(raw, str) else ujson.dumps(raw, reject_bytes=False)
    if len(text) <= RAW_LIMIT:
        return raw
    return text[:RAW_LIMIT] + "…"


def _clip(text: Any) -> str:
    text = text if isinstance(text, str) else str(text)
    return text if len(text) <= TEXT_LIMIT else text[:TEXT_LIMIT] + "…"


def _ascii(value: Any) -> Any:
    return value.encode("utf-8", "backslashreplace").decode() if isinstance(value, str) else value


def encode(message: dict[str, Any]) -> bytes:
    """Outbound messages are JSON with sorted keys (as Scrapy Cluster's); never raises.

    A message that cannot be encoded as it is (a lone surrogate, NaN, a value ujson cannot write)
    goes out ASCII-escaped with its `data` left out, else as its scalar fields only."""
    try:
        return ujson.dumps(message, sort_keys=True, ensure_ascii=False, escape_forward_slashes=False,
                           allow_nan=False).encode()  # fmt: skip
    except Exception:
        log.exception("Outbound message could not be encoded as it is; sent without what failed")
    try:
        rest = {**message, "data": NOT_SHOWN} if "data" in message else message
        return ujson.dumps(rest, sort_keys=True, escape_forward_slashes=False, allow_nan=False).encode()
    except Exception:
        scalars = {str(k): _ascii(v) if isinstance(v, bool | int | str) else f"({type(v).__name__}, not shown)"
                   for k, v in message.items()}  # fmt: skip
        scalars = {k: v for k, v in scalars.items() if not isinstance(v, int) or abs(v) < 2**63}
        return json.dumps(scalars, sort_keys=True).encode()  # ASCII, every value a bool, an int or a str
