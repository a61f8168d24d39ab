"""Reading the frontier's stored requests by queue member (tools, tests and answers).

A queue member is its field (fair-queuing tag and request id, crawl_request.field_of) followed by its
crawl's code; the code names the crawl (`<sid>:crawl_names`), whose requests hash of the domain holds
the payload under the field, and
whose profiles hash its crawl-level fields (utils/frontier/crawl_request.py).
"""

from __future__ import annotations

from typing import Any

from utils.config.clients import RedisClient
from utils.frontier import crawl_request, keys
from utils.frontier.shards import Shards


def crawl_of(client: RedisClient, spiderid: str, member: str | bytes) -> tuple[str, str] | None:
    """(appid, crawlid) of a queue member, or None when its crawl's code is unknown; `spiderid` with
    its shard's tag in front on a Redis Cluster."""
    code = crawl_request.code_of(_text(member))
    name = client.hget(keys.crawl_names(spiderid), code)
    if name is None:
        return None
    appid, _, crawlid = _text(name).partition("\t")
    return appid, crawlid


def read(client: RedisClient, spiderid: str, domain: str, member: str | bytes) -> dict[str, Any] | None:
    """The request a queue member stands for, as spiders see it; None if it is gone."""
    member = _text(member)
    prefix = Shards.for_client(client).tag(domain) + spiderid  # the domain's shard's key names
    crawl = crawl_of(client, prefix, member)
    if crawl is None:
        return None
    payload = client.hget(keys.crawl_requests(prefix, *crawl, domain), crawl_request.field_of(member))
    if payload is None:
        return None
    return crawl_request.restore(payload, profile(client, prefix, *crawl, payload), spiderid, *crawl, member)


def profile(client: RedisClient, spiderid: str, appid: str, crawlid: str, payload: str | bytes) -> str | None:
    """The JSON of the crawl-level fields a stored request names (None = none); `spiderid` with its
    shard's tag in front on a Redis Cluster."""
    pid = crawl_request.profile_id(payload)
    if not pid:
        return None
    found = client.hget(keys.crawl_profiles(spiderid, appid, crawlid), pid)
    return None if found is None else _text(found)


def _text(value: str | bytes) -> str:
    return value.decode() if isinstance(value, bytes) else value
