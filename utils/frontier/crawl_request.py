"""The stored form of a crawl request: the validated message, compact, plus Shoal's own fields.

Fields that hold their schema default are left out of the stored JSON, and so are the fields the
frontier's keys already say (crawl, request id, creation time): a child request of a typical crawl
stores ~110 bytes instead of ~450. `from_record` and `restore` fill them in again when it is read.
"""

from __future__ import annotations

from typing import Any

import ujson

from utils import schemas

ID_DIGITS = 16  # a request id: 13 hex digits of server time in µs, then a 3-digit counter
# Named by the frontier's keys and the queue member rather than stored in each payload.
KEPT_BY_KEYS = frozenset({"appid", "crawlid", "spiderid", "request_id", "ts"})

# Added by Shoal when a request is stored; never accepted from clients.
INTERNAL_FIELDS = ("curdepth", "request_id", "attempt", "blocks", "ts", "callback", "cb_kwargs", "not_before")


def crawl_defaults() -> dict[str, Any]:
    props = schemas.schema("crawl")["properties"]
    return {name: spec["default"] for name, spec in props.items() if "default" in spec}


_DEFAULTS = crawl_defaults()
_MISSING = object()


def to_record(request: dict[str, Any]) -> dict[str, Any]:
    """The compact form of a validated crawl request (seed or child): defaults left out."""
    record = {k: v for k, v in request.items() if v is not None and _DEFAULTS.get(k, _MISSING) != v}
    for required in ("url", "appid", "crawlid", "spiderid", "priority"):
        record[required] = request.get(required, _DEFAULTS.get(required))
    record.setdefault("curdepth", 0)
    return record


def from_record(record: dict[str, Any]) -> dict[str, Any]:
    """The full request with every default filled in (what spiders see as meta)."""
    full = dict(_DEFAULTS)
    full.update(record)
    full.setdefault("curdepth", 0)
    full.setdefault("attempt", 0)
    return full


def encode(record: dict[str, Any]) -> str:
    """The JSON stored in the frontier: without what the frontier's keys already say.

    The crawl (appid, crawlid, spiderid) is named by the hash the payload sits in, and the request
    id and creation time are the queue member's id, so a stored child request is ~110 bytes
    instead of ~230 (the "queued request memory" target of DESIGN.md). `restore` puts them back.
    """
    stored = {k: v for k, v in record.items() if k not in KEPT_BY_KEYS}
    return ujson.dumps(stored, ensure_ascii=False, escape_forward_slashes=False)


def restore(payload: str | bytes, spiderid: str, appid: str, crawlid: str, request_id: str) -> dict[str, Any]:
    """A stored request as spiders and answers see it: crawl, request id and `ts` filled in."""
    record = decode(payload) if payload else {}
    record["appid"], record["crawlid"], record["spiderid"] = appid, crawlid, spiderid
    record["request_id"] = request_id[:ID_DIGITS]
    record["ts"] = created_at(request_id)
    return record


def created_at(request_id: str) -> float | None:
    """Unix time (ms precision) at which a request was first queued: its id's first 13 hex digits."""
    try:
        return round(int(request_id[:13], 16) / 1_000_000, 3)
    except ValueError:
        return None


def decode(payload: str | bytes) -> dict[str, Any]:
    loaded: dict[str, Any] = ujson.loads(payload)
    return loaded
