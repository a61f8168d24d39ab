"""Moving the stored requests an older Shoal left in Redis into the current layout (lua/upgrade.lua).

Until this release a crawl's requests sat in one hash per crawl; now they sit in one per crawl and
domain (utils/frontier/crawl_request.py, docs/reference/redis-keys.md). Every redis monitor runs
this once at start: a cheap check per live crawl when there is nothing to move. Payloads are moved as
they are; their older JSON form is read like the current one. Until a crawl is moved, a pop of one of
its requests finds no payload and the lease goes back to its queue when it expires (the reaper).
"""

from __future__ import annotations

import logging

from utils.config.clients import RedisClient
from utils.frontier import keys
from utils.frontier.scripts import source
from utils.frontier.shards import Shards

log = logging.getLogger(__name__)
CHUNK = 5000  # requests per upgrade call (a few ms of Redis time)


def upgrade_stored_requests(client: RedisClient, shards: Shards | None = None) -> int:
    """Move every live crawl's requests stored in the older layout; returns how many were moved."""
    script = client.register_script(source("upgrade"))
    moved = 0
    for member in client.zrange(keys.CRAWLS, 0, -1):
        spiderid, appid, crawlid = _text(member).split("\t", 2)
        for tag in (shards or Shards.for_client(client)).tags:
            legacy = keys.legacy_crawl_requests(tag + spiderid, appid, crawlid)
            left = int(client.hlen(legacy)) if client.type(legacy) in ("hash", b"hash") else 0
            while left:
                moved += left
                left = int(script(keys=[keys.shard_route(tag)], args=[tag + spiderid, appid, crawlid, CHUNK]))
                moved -= left
    if moved:
        log.info("Stored requests moved to the per-domain layout", extra={"requests": moved})
    return moved


def _text(value: str | bytes) -> str:
    return value.decode() if isinstance(value, bytes) else value
