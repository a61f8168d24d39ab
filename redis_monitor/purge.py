"""Taking a crawl out of the frontier (stop and expire), through utils/lua/purge.lua.

The script removes a chunk of the crawl's index per call, so a very large crawl never blocks
Redis for long; the blacklist entry is written by the first call, so no child slips in after.
"""

from __future__ import annotations

from utils.clients import RedisClient
from utils.progress import CrawlRef
from utils.scripts import source

PURGE_CHUNK = 5000  # index entries per purge call (~5 ms of Redis time)


class Purger:
    def __init__(self, client: RedisClient, blacklist_ttl: int, state_ttl: int, chunk: int = PURGE_CHUNK) -> None:
        self.script = client.register_script(source("purge"))
        self.blacklist_ttl = blacklist_ttl
        self.state_ttl = state_ttl
        self.chunk = chunk

    def purge(self, ref: CrawlRef, reason: str, check_expiry: bool = False) -> int | None:
        """Requests removed; None when `check_expiry` found the crawl not (or no longer) due."""
        total, check = 0, check_expiry
        while True:
            args = [ref.spiderid, ref.appid, ref.crawlid, reason, "1" if check else "0",
                    self.blacklist_ttl, self.state_ttl, self.chunk]  # fmt: skip
            purged, left = (int(v) for v in self.script(args=args))
            if purged < 0:
                return None
            total, check = total + purged, False
            if left == 0:
                return total
