"""What a key may send to `/feed`: the scope each kind of request needs, its own app only, and the
app's quota checked before the request leaves for Kafka (the kafka monitor checks it again)."""

from __future__ import annotations

import asyncio
from typing import Any

import redis

from rest.envelope import FORBIDDEN, OVER_QUOTA, ApiError
from rest.gateway import Gateway
from utils.apps.api_keys import Principal

ADMIN_KINDS = ("stats", "zookeeper")  # cluster-wide: the admin's
READ_ACTIONS = ("info",)  # an action that only reads needs `info`; the others change a crawl: `stop`


def needed_scope(kind: str, message: dict[str, Any]) -> str:
    if kind == "crawl":
        return "feed"
    if kind == "action":
        return "info" if message.get("action") in READ_ACTIONS else "stop"
    return "admin"


def check_access(principal: Principal, kind: str, message: dict[str, Any]) -> None:
    """403 when the key lacks the kind's scope or names another app than its own."""
    scope = needed_scope(kind, message)
    if not principal.allows(scope):
        raise ApiError(403, FORBIDDEN, f"a {kind} request needs the {scope!r} scope")
    if kind not in ADMIN_KINDS and not principal.sees(message.get("appid")):
        raise ApiError(403, FORBIDDEN, f"this key is app {principal.app!r}'s, not {message.get('appid')!r}'s")


async def check_quota(gw: Gateway, message: dict[str, Any]) -> None:
    """429 naming the quota when the crawl's app is over one (nothing is sent to Kafka then)."""
    appid = message.get("appid")
    if not isinstance(appid, str):
        return
    try:
        refusal = await asyncio.to_thread(gw.gate.check, appid)
    except redis.RedisError:  # the kafka monitor checks again before it queues: Kafka still takes the request
        return
    if refusal is not None:
        raise ApiError(429, OVER_QUOTA, refusal.cause)
