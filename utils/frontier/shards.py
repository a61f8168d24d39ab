"""Frontier shards: which hash tag the frontier keys of a domain carry on a Redis Cluster.

On one Redis there is a single shard with an empty tag, so every key keeps its Scrapy Cluster name.
On a Redis Cluster (REDIS_CLUSTER) a domain belongs to one of REDIS_CLUSTER_SHARDS shards, and every
frontier key of that shard starts with the shard's tag, `{...}`: the queue and payloads of the
domain, the spider's heads, in-flight and delayed sets, the crawl's progress, requests, dupefilter
and page counters, the throttle keys. So each Lua script touches one slot (one master), while the
shards spread a crawl over every master. The tags are chosen so that shard k's slot falls in the
k-th of equal slot ranges: masters created by `redis-cli --cluster create` own equal ranges, so each
gets the same number of shards.
"""

from __future__ import annotations

import zlib
from functools import cached_property
from typing import Any

import redis
from redis.crc import REDIS_CLUSTER_HASH_SLOTS, key_slot

from utils.config import default_settings
from utils.config.settings import Settings


class Shards:
    """The shard tags of a frontier: `[""]` on one Redis, N balanced `{...}` tags on a cluster."""

    def __init__(self, count: int = 1) -> None:
        self.count = max(1, count)

    @classmethod
    def from_settings(cls, settings: Settings) -> Shards:
        return cls(settings.get_int("REDIS_CLUSTER_SHARDS") if settings.get_bool("REDIS_CLUSTER") else 1)

    @classmethod
    def for_client(cls, client: Any) -> Shards:
        """The shards a client implies when no settings are at hand: the default count on a cluster."""
        return cls(default_settings.REDIS_CLUSTER_SHARDS if isinstance(client, redis.RedisCluster) else 1)

    @property
    def clustered(self) -> bool:
        return self.count > 1

    @cached_property
    def tags(self) -> list[str]:
        """Every shard's tag, in shard order."""
        return [balanced_tag(k, self.count) for k in range(self.count)] if self.clustered else [""]

    def tag(self, domain: str) -> str:
        """The tag of the shard a domain belongs to (CRC-32 of its name: stable across processes)."""
        if not self.clustered:
            return ""
        return self.tags[zlib.crc32(domain.encode()) % self.count]


def balanced_tag(shard: int, count: int) -> str:
    """`{<shard>.<n>}` with the smallest n whose slot lies in the shard's 1/count of the slots."""
    low, high = shard * REDIS_CLUSTER_HASH_SLOTS // count, (shard + 1) * REDIS_CLUSTER_HASH_SLOTS // count
    n = 0
    while not low <= key_slot(f"{shard}.{n}".encode()) < high:
        n += 1
    return f"{{{shard}.{n}}}"


def spider_shards(spiders: list[str], shards: Shards) -> list[tuple[str, str]]:
    """(spiderid, its key prefix in one shard) for every spider and shard: what readers that sum a
    spider's frontier (queues, in flight, heads) loop over. The prefix is the shard's tag followed
    by the spider id, so `keys.heads(prefix)` is that shard's heads."""
    return [(sid, tag + sid) for sid in spiders for tag in shards.tags]
