"""Request bodies: JSON parsing and validation with the kafka monitor's JSON Schemas.

Scrapy Cluster's gateway forwarded anything that parsed as JSON, so a bad request got SUCCESS
and then silence (reference §15.13). Here /feed tries the request schemas of utils/schemas in
the kafka monitor's order (utils/schemas/matching.py, the monitor's own matcher) and refuses,
with the cause, a body that none of them accepts.
"""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from typing import Any

import fastjsonschema
import ujson
from fastapi import Request

from rest.envelope import BAD_SCHEMA, MUST_JSON, NEED_JSON, ApiError
from rest.limits import check_depth
from utils import schemas
from utils.config.address_policy import AddressPolicy
from utils.config.errors import InvalidMessage
from utils.schemas import wire
from utils.schemas.matching import Matcher

REQUEST_KINDS = ("crawl", "action", "stats", "zookeeper")  # the kafka monitor's plugin ranks


def require_json(request: Request) -> None:
    """415 unless the body is declared application/json: a cross-site form or `text/plain` post (which
    a browser sends without a preflight) is refused before its body is read."""
    media = request.headers.get("content-type", "").split(";", 1)[0].strip().lower()
    if media != "application/json":
        raise ApiError(415, NEED_JSON, f"Content-Type is {media or 'missing'}")


def parse_json(raw: bytes, max_depth: int = 0) -> Any:
    """The decoded body; 400 MUST_JSON when it is not JSON (or is `null`, as Flask's get_json), 400
    when it nests deeper than `max_depth` levels (0 = unchecked), 400 MUST_JSON with the reason when a
    value cannot travel (utils/schemas/wire.py: `1e400`, NaN, lone surrogates, 64-bit overflow)."""
    try:
        value = ujson.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ApiError(400, MUST_JSON) from exc
    if value is None:
        raise ApiError(400, MUST_JSON)
    if max_depth:
        check_depth(value, max_depth)
    reason = wire.refusal(value)  # what the kafka monitor would refuse: non-finite numbers, surrogates, ...
    if reason is not None:
        raise ApiError(400, MUST_JSON, reason)
    return value


def refuse_url(message: Any, policy: AddressPolicy) -> None:
    """400 for a crawl request whose URL, or own proxy, the address policy refuses (the kafka monitor
    and the crawler would too)."""
    url = message.get("url") if isinstance(message, dict) else None
    if isinstance(url, str):
        reason = policy.url_refusal(url if "://" in url else "http://" + url)
        if reason:
            raise ApiError(400, BAD_SCHEMA, f"url: refused by the address policy ({reason})")
        proxy = message.get("proxy")
        reason = policy.proxy_refusal(proxy) if isinstance(proxy, str) and proxy else None
        if reason:
            raise ApiError(400, BAD_SCHEMA, f"proxy: refused by the address policy ({reason})")


def request_kinds() -> list[str]:
    """The request schemas shipped now, in the kafka monitor's order."""
    available = set(schemas.available())
    return [kind for kind in REQUEST_KINDS if kind in available]


def match_request(message: Any) -> str:
    """The kind of request `message` is; 400 BAD_SCHEMA naming the closest schema's complaint."""
    try:
        kind, _ = Matcher([(kind, kind) for kind in request_kinds()]).match(message)
    except InvalidMessage as exc:
        raise ApiError(400, BAD_SCHEMA, exc.cause or "no request schema is installed") from exc
    return kind


def check(kind: str, message: dict[str, Any]) -> None:
    """Validate a request the gateway builds itself, when its schema is installed."""
    if kind in schemas.available():
        try:
            schemas.validate(kind, message)
        except InvalidMessage as exc:
            raise ApiError(400, BAD_SCHEMA, exc.cause or exc.message) from exc


@cache
def poll_schema() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(resources.files("rest.schemas").joinpath("poll.json").read_text())
    return loaded


@cache
def _poll_validator() -> Any:
    return fastjsonschema.compile(poll_schema())


def poll_id(message: Any) -> str:
    """The poll_id of a /poll body; 400 BAD_SCHEMA with the cause otherwise."""
    try:
        valid: dict[str, Any] = _poll_validator()(message)
    except fastjsonschema.JsonSchemaValueException as exc:
        raise ApiError(400, BAD_SCHEMA, exc.message) from exc
    return str(valid["poll_id"])
