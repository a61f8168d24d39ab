"""The stored form of a crawl request: the validated message, compact, plus Shoal's own fields.

Fields that hold their schema default are left out of the stored JSON (a child request of a
typical crawl stores ~200 bytes instead of ~450) and are filled in again when it is read.
"""

from __future__ import annotations

import hashlib
import random
import time
from typing import Any

import ujson

from utils import schemas

# Added by Shoal when a request is stored; never accepted from clients.
INTERNAL_FIELDS = ("curdepth", "request_id", "attempt", "ts", "callback", "not_before")


def crawl_defaults() -> dict[str, Any]:
    props = schemas.schema("crawl")["properties"]
    return {name: spec["default"] for name, spec in props.items() if "default" in spec}


_DEFAULTS = crawl_defaults()
_MISSING = object()
_random = random.Random()  # seeded from os.urandom at import; ids need uniqueness, not secrecy


def new_request_id(seed: str | None = None) -> str:
    """16 hex digits; derived from `seed` (e.g. topic/partition/offset) so replays get the same id."""
    if seed is None:
        return f"{_random.getrandbits(64):016x}"  # no syscall per found link (uuid4 showed in profiles)
    return hashlib.sha1(seed.encode()).hexdigest()[:16]


def to_record(request: dict[str, Any], request_id: str | None = None) -> dict[str, Any]:
    """The compact stored form of a validated crawl request (seed or child)."""
    record = {k: v for k, v in request.items() if v is not None and _DEFAULTS.get(k, _MISSING) != v}
    for required in ("url", "appid", "crawlid", "spiderid", "priority"):
        record[required] = request.get(required, _DEFAULTS.get(required))
    record.setdefault("curdepth", 0)
    record.setdefault("ts", round(time.time(), 3))
    record["request_id"] = request.get("request_id") or request_id or new_request_id()
    return record


def from_record(record: dict[str, Any]) -> dict[str, Any]:
    """The full request with every default filled in (what spiders see as meta)."""
    full = dict(_DEFAULTS)
    full.update(record)
    full.setdefault("curdepth", 0)
    full.setdefault("attempt", 0)
    return full


def encode(record: dict[str, Any]) -> str:
    return ujson.dumps(record, ensure_ascii=False, escape_forward_slashes=False)


def decode(payload: str | bytes) -> dict[str, Any]:
    loaded: dict[str, Any] = ujson.loads(payload)
    return loaded
