"""Taking a crawl out of the frontier (stop and expire), through utils/frontier/lua/purge.lua.

The script removes a chunk of the crawl's requests per call, so a very large crawl never blocks
Redis for long; the blacklist entry is written by the first call, so no child slips in after. It
runs in every frontier shard (one on a single Redis). An expiry is claimed first, once, on the
crawl's timeout key (claim_expiry.lua), so exactly one redis monitor expires a crawl.
"""

from __future__ import annotations

from utils.config.clients import RedisClient
from utils.frontier import keys
from utils.frontier.progress import CrawlRef
from utils.frontier.scripts import source
from utils.frontier.shards import Shards
from utils.frontier.tier import DiskTier

PURGE_CHUNK = 5000  # requests per purge call (~5 ms of Redis time)


class Purger:
    def __init__(
        self,
        client: RedisClient,
        blacklist_ttl: int,
        state_ttl: int,
        chunk: int = PURGE_CHUNK,
        shards: Shards | None = None,
        disk: DiskTier | None = None,
    ) -> None:
        self.client = client
        self.script = client.register_script(source("purge"))
        self.claim = client.register_script(source("claim_expiry"))
        self.blacklist_ttl = blacklist_ttl
        self.state_ttl = state_ttl
        self.chunk = chunk
        self.shards = shards or Shards.for_client(client)
        self.disk = disk

    def purge(self, ref: CrawlRef, reason: str, check_expiry: bool = False) -> int | None:
        """Requests removed; None when `check_expiry` found the crawl not (or no longer) due."""
        timeout = keys.timeout(ref.spiderid, ref.appid, ref.crawlid)
        if check_expiry and not int(self.claim(keys=[timeout])):
            return None
        pipe = self.client.pipeline(transaction=False)
        pipe.delete(timeout)
        pipe.zrem(keys.TIMEOUTS, keys.crawl_member(ref.spiderid, ref.appid, ref.crawlid))
        pipe.execute()
        purged = sum(self._purge_shard(tag, ref, reason) for tag in self.shards.tags)
        if self.disk is not None:
            # The tail next; then Redis again, for rows a refill brought in before the tail's lock was held.
            purged += self.disk.purge(ref, reason)
            purged += sum(self._purge_shard(tag, ref, reason) for tag in self.shards.tags)
            self.disk.sweep_spider(ref.spiderid)  # windows it emptied whose tails hold other crawls
        return purged

    def _purge_shard(self, tag: str, ref: CrawlRef, reason: str) -> int:
        total = 0
        while True:
            args = [tag + ref.spiderid, ref.appid, ref.crawlid, reason, "0", self.blacklist_ttl, self.state_ttl,
                    self.chunk]  # fmt: skip
            purged, left = (int(v) for v in self.script(keys=[keys.shard_route(tag)], args=args))
            total += purged
            if left == 0:
                return total
