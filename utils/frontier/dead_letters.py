"""Dead-letter records: what finally failed, why, how often it was tried, and when.

A crawl request that exhausted its retries (or whose lease expired too often) is kept per crawl in
Redis (`keys.dead_letters`: newest first, at most DEAD_LETTER_MAX, expiring DEAD_LETTER_TTL after
the last one) so it can be listed, replayed or purged, and is also written to the topic
`<prefix>.dead_letter`. Rejected incoming messages go to that topic only (utils.schemas.answers).
"""

from __future__ import annotations

import time
from typing import Any

import ujson

from utils.config.redact import redact_request
from utils.frontier import keys

DEAD_LETTER_MAX = 10_000  # records kept per crawl
DEAD_LETTER_TTL = 7 * 86400  # seconds a crawl's dead letters are kept after the last one


def record(request: dict[str, Any], error: str, status: int | None, attempts: int, source: str) -> dict[str, Any]:
    """The dead-letter shape shared by the crawler, the reaper and the dead_letter topic."""
    now = time.time()
    return {
        "request": redact_request(request),  # a replay goes without the proxy's credentials
        "url": request.get("url"),
        "appid": request.get("appid"),
        "crawlid": request.get("crawlid"),
        "spiderid": request.get("spiderid"),
        "request_id": request.get("request_id"),
        "error": error,
        "status_code": status,
        "attempts": attempts,
        "first_ts": request.get("ts"),
        "dead_ts": now,
        "source": source,
    }


def store(pipe: Any, entry: dict[str, Any]) -> None:
    """Queue the write of a record to its crawl's dead-letter list on a pipeline."""
    key = keys.dead_letters(entry["spiderid"], entry["appid"], entry["crawlid"])
    pipe.lpush(key, ujson.dumps(entry, ensure_ascii=False))
    pipe.ltrim(key, 0, DEAD_LETTER_MAX - 1)
    pipe.expire(key, DEAD_LETTER_TTL)
