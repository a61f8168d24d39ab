"""How much Redis the frontier takes: Redis's own figures, per stored request, per crawl.

Read by the frontier metrics (`shoal_frontier_bytes_per_request`), `shoal status` and the dashboard.
A crawl's figure is MEMORY USAGE of its keys (its stored requests through its domain index, its
profiles, its dupefilter), sampled over at most SAMPLE of its domains and scaled: O(SAMPLE) per crawl.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from utils.frontier import keys
from utils.frontier.shards import Shards

if TYPE_CHECKING:
    from utils.config.clients import RedisClient
    from utils.frontier.progress import CrawlRef

SAMPLE = 200  # a crawl's domains whose requests hash is measured (the rest scaled from them)


@dataclass(frozen=True)
class RedisMemory:
    used: int  # bytes, summed over the masters (INFO used_memory)
    limit: int  # bytes, summed maxmemory; 0 = some master has no limit
    policy: str  # maxmemory-policy ('noeviction' refuses writes; any other may evict frontier keys)

    def share(self) -> float | None:
        """used / limit; None without a limit."""
        return self.used / self.limit if self.limit else None


def redis_memory(client: RedisClient) -> RedisMemory:
    """INFO memory of one Redis, or of every master of a Redis Cluster, summed."""
    info: Any = client.info("memory")
    nodes = list(info.values()) if info and all(isinstance(v, dict) for v in info.values()) else [info]
    limits = [int(n.get("maxmemory", 0)) for n in nodes]
    policies = sorted({str(n.get("maxmemory_policy", "")) for n in nodes})
    return RedisMemory(sum(int(n.get("used_memory", 0)) for n in nodes), 0 if 0 in limits else sum(limits),
                       ",".join(policies))  # fmt: skip


def per_request(memory: RedisMemory, requests: int) -> float | None:
    """Redis bytes per stored request (queued, in flight, retrying): everything Redis holds over them."""
    return memory.used / requests if requests > 0 else None


def crawl_bytes(client: RedisClient, ref: CrawlRef, shards: Shards | None = None) -> int:
    """Bytes of Redis a crawl's own keys take (stored requests, profiles, domain index, dupefilter)."""
    total = 0
    for tag in (shards or Shards.for_client(client)).tags:
        sid = tag + ref.spiderid
        index = keys.crawl_domains(sid, ref.appid, ref.crawlid)
        count = int(client.scard(index))
        sample = [_text(d) for d in client.srandmember(index, SAMPLE)] if count else []
        names = [keys.crawl_requests(sid, ref.appid, ref.crawlid, d) for d in sample]
        fixed = [index, keys.crawl_profiles(sid, ref.appid, ref.crawlid), keys.dupefilter(sid, ref.crawlid),
                 keys.bloom_dupefilter(sid, ref.crawlid)]  # fmt: skip
        pipe = client.pipeline(transaction=False)
        for name in [*names, *fixed]:
            pipe.memory_usage(name, samples=0)
        sizes = [int(s or 0) for s in pipe.execute()]
        measured = sum(sizes[: len(names)])
        total += (measured * count // len(names) if names else 0) + sum(sizes[len(names) :])
    return total


def describe(memory: RedisMemory, requests: int) -> str:
    """One line for `shoal status`."""
    mib = 1024 * 1024
    limit = f"of {memory.limit / mib:,.0f} MiB ({memory.share():.0%})" if memory.limit else "(no maxmemory)"
    each = per_request(memory, requests)
    per = f", {each:,.0f} B per stored request ({requests:,})" if each is not None else ""
    warn = "" if memory.policy == "noeviction" else f"; policy {memory.policy}: Redis may evict frontier keys"
    return f"redis: {memory.used / mib:,.1f} MiB {limit}{per}{warn}"


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value
