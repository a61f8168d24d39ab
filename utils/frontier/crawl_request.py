"""The stored form of a crawl request: what differs per request, and its crawl's shared fields once.

A stored request is split in two (docs/reference/redis-keys.md, "Stored requests"):
- the crawl-level fields a crawl's requests share (attrs, allowed_domains, regexes, cookie, maxdepth,
  expires, ...: `CRAWL_LEVEL`) go to the crawl's profiles hash once, as JSON; the enqueue script
  gives each distinct one a short id;
- the per-request part is `<profile id> <curdepth> <priority> <attempt> <url>`, then a tab and a
  JSON object of whatever else the request carries (callback, cb_kwargs, headers of a seed, ...) if
  anything; `http://` is stored as `//` and `https://` as `///` (a stored URL is absolute, so never
  starts with `/` otherwise). A child of a crawl with 20 regexes, attrs and a cookie stores ~80
  bytes instead of ~1,700.
Fields holding their schema default are left out, and so are the fields the frontier's keys already
say (crawl, request id, creation time). `restore` puts everything back. A payload that opens with `{`
is the whole request as JSON, as an older Shoal stored it; it is read as before.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import ujson

from utils import schemas

ID_DIGITS = 16  # a request id: 13 hex digits of server time in µs, then a 3-digit counter
TAG_MARK = "v"  # a queue member that opens with it carries its crawl's fair-queuing tag (lua/lib/member.lua)
TAG_DIGITS = 12  # hex digits of that tag
FIELD_DIGITS = 1 + TAG_DIGITS + ID_DIGITS  # a tagged member's field in its requests hash (without the code)
# Named by the frontier's keys and the queue member rather than stored in each payload.
KEPT_BY_KEYS = frozenset({"appid", "crawlid", "spiderid", "request_id", "ts"})
# Fields a crawl's requests share: a child inherits them from its page (crawler/meta.py INHERITED).
CRAWL_LEVEL = (
    "maxdepth", "domain_max_pages", "allowed_domains", "allow_regex", "deny_regex", "deny_extensions",
    "expires", "useragent", "cookie", "attrs", "proxy", "proxy_labels", "dupefilter", "revisit", "sitemaps",
    "ladder_of", "extract", "near_duplicates", "weight",
)  # fmt: skip
_HEAD = frozenset({"url", "curdepth", "priority", "attempt"})
_NOT_EXTRA = KEPT_BY_KEYS | _HEAD | frozenset(CRAWL_LEVEL)
_UNSAFE_URL = (" ", "\t", "\n", "\r")  # a URL with one of them goes in the JSON part

# Added by Shoal when a request is stored; never accepted from clients.
INTERNAL_FIELDS = ("curdepth", "request_id", "attempt", "blocks", "ts", "callback", "cb_kwargs", "not_before")


class Stored(NamedTuple):
    """A request as the enqueue script takes it: its crawl-level fields (JSON, '' = none) and the
    per-request part, whose profile id slot (before the first space) the script fills in."""

    profile: str
    payload: str


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


def encode(record: dict[str, Any]) -> Stored:
    """A record (`to_record`) as stored: crawl-level fields apart, the rest as compact as it goes.

    Raises TypeError or ValueError when a value is not JSON (a spider's cb_kwargs) or a number
    field is not an integer."""
    profile = {k: record[k] for k in CRAWL_LEVEL if k in record}
    extra = {k: v for k, v in record.items() if k not in _NOT_EXTRA}
    url = _short_url(str(record.get("url") or ""))
    if any(c in url for c in _UNSAFE_URL):
        extra["url"], url = str(record.get("url")), ""
    head = f" {_int(record.get('curdepth'))} {_int(record.get('priority', 1))} {_int(record.get('attempt'))} {url}"
    payload = head + "\t" + _dumps(extra) if extra else head
    return Stored(_dumps(profile, sort_keys=True) if profile else "", payload)


def restore(
    payload: str | bytes, profile: str | bytes | None, spiderid: str, appid: str, crawlid: str, request_id: str
) -> dict[str, Any]:
    """A stored request as spiders and answers see it: its profile's fields, crawl, request id and
    `ts` filled in. `profile` is the JSON its profile id names ('' or None when it has none)."""
    record = decode(payload, profile) if payload else {}
    record["appid"], record["crawlid"], record["spiderid"] = appid, crawlid, spiderid
    record["request_id"] = id_of(request_id)
    record["ts"] = created_at(request_id)
    return record


def decode(payload: str | bytes, profile: str | bytes | None = None) -> dict[str, Any]:
    """The fields of a stored request (without those its keys name); an older Shoal's JSON as it is."""
    text = payload.decode() if isinstance(payload, bytes) else payload
    if text.startswith("{"):
        legacy: dict[str, Any] = ujson.loads(text)
        return legacy
    _, depth, priority, attempt, rest = text.split(" ", 4)
    url, _, extra = rest.partition("\t")
    record: dict[str, Any] = ujson.loads(profile) if profile else {}
    record["url"] = _full_url(url)
    record["curdepth"], record["priority"] = int(depth), int(priority)
    if attempt != "0":
        record["attempt"] = int(attempt)
    if extra:
        record.update(ujson.loads(extra))
    return record


def profile_id(payload: str | bytes) -> str:
    """The profile id a stored request names ('' = none, or an older Shoal's JSON)."""
    text = payload.decode() if isinstance(payload, bytes) else payload
    return "" if text.startswith("{") else text.partition(" ")[0]


def field_of(member: str) -> str:
    """A queue member's field in its crawl's requests hash: the member without its crawl's code."""
    return member[:FIELD_DIGITS] if member.startswith(TAG_MARK) else member[:ID_DIGITS]


def code_of(member: str) -> str:
    """The crawl code a queue member ends with (`<sid>:crawl_names`)."""
    return member[len(field_of(member)) :]


def id_of(member: str) -> str:
    """The request id (16 hex digits) of a queue member or of its field, without the fair-queuing tag."""
    start = 1 + TAG_DIGITS if member.startswith(TAG_MARK) else 0
    return member[start : start + ID_DIGITS]


def created_at(request_id: str) -> float | None:
    """Unix time (ms precision) at which a request was first queued: its id's first 13 hex digits
    (`request_id` may be a whole queue member)."""
    try:
        return round(int(id_of(request_id)[:13], 16) / 1_000_000, 3)
    except ValueError:
        return None


def _short_url(url: str) -> str:
    if url.startswith("http://"):
        return url[5:]
    if url.startswith("https://"):
        return "/" + url[6:]
    return url


def _full_url(url: str) -> str:
    if url.startswith("///"):
        return "https://" + url[3:]
    if url.startswith("//"):
        return "http://" + url[2:]
    return url


def _int(value: Any) -> int:
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise TypeError(f"not an integer: {value!r}")
    return int(value or 0)


def _dumps(value: dict[str, Any], sort_keys: bool = False) -> str:
    return ujson.dumps(value, ensure_ascii=False, escape_forward_slashes=False, sort_keys=sort_keys)
