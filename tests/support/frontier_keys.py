"""Frontier key names as a test's Redis backend holds them.

On one redis-server the names are Scrapy Cluster's; on a Redis Cluster each frontier key starts with
the hash tag of its domain's shard (utils/frontier/shards.py), and a crawl's progress is kept per shard.
"""

from __future__ import annotations

from typing import Any

import redis

from utils.frontier import keys, progress
from utils.frontier.progress import CrawlRef
from utils.frontier.shards import Shards


def in_shard(client: Any, key: str, domain: str) -> str:
    """`key` (a name from utils.frontier.keys) in the shard that holds `domain`."""
    return Shards.for_client(client).tag(domain) + key


def every_key(client: Any, pattern: str = "*") -> list[Any]:
    """KEYS over the whole keyspace: on a Redis Cluster, of every master (KEYS asks one by default)."""
    if isinstance(client, redis.RedisCluster):
        return list(client.keys(pattern, target_nodes=redis.RedisCluster.PRIMARIES))
    return list(client.keys(pattern))


def crawl_counters(client: Any, spiderid: str, appid: str, crawlid: str) -> dict[str, int]:
    """A crawl's progress counters, summed over the shards."""
    found = progress.read(client, CrawlRef(spiderid, appid, crawlid))
    return dict(found.counters) if found else {}


def progress_hash(client: Any, spiderid: str, appid: str, crawlid: str) -> dict[Any, Any]:
    """HGETALL of a crawl's progress, summed over the shards, in the client's own types (bytes or str)."""
    merged: dict[Any, Any] = {}
    for tag in Shards.for_client(client).tags:
        for name, value in client.hgetall(tag + keys.crawl_progress(spiderid, appid, crawlid)).items():
            text = value.decode() if isinstance(value, bytes) else value
            if name in merged and text.lstrip("-").isdigit():
                old = merged[name].decode() if isinstance(merged[name], bytes) else merged[name]
                total = str(int(old) + int(text))
                merged[name] = total.encode() if isinstance(value, bytes) else total
            elif name not in merged:
                merged[name] = value
    return merged


def first_shard(client: Any, key: str) -> str:
    """`key` in the first shard: where counters without a domain (progress written by tests) go."""
    return Shards.for_client(client).tags[0] + key


def shard_sum(client: Any, command: str, key: str) -> int:
    """A numeric command (zcard, hlen, exists, ...) of `key` added up over every shard's copy."""
    return sum(int(getattr(client, command)(tag + key) or 0) for tag in Shards.for_client(client).tags)


def stored_count(client: Any, spiderid: str, appid: str, crawlid: str) -> int:
    """How many requests a crawl has stored (queued, delayed, in flight), over its domain index and shards."""
    total = 0
    for tag in Shards.for_client(client).tags:
        sid = tag + spiderid
        for domain in client.smembers(keys.crawl_domains(sid, appid, crawlid)):
            name = domain.decode() if isinstance(domain, bytes) else domain
            total += client.hlen(keys.crawl_requests(sid, appid, crawlid, name))
    return total
