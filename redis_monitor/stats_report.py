"""Stats answers in Scrapy Cluster's shapes (reference §3.3), read without KEYS.

Counters come from utils/observability/stats.py (time-bucketed; every base listed in `stats:index`), process
counts from the heartbeat index, queue backlogs from each spider's domain registry
(`<sid>:heads`) plus ZCARD. Window keys are strings of seconds plus "lifetime"; an empty
window is left out, as Scrapy Cluster's vanished rolling keys were.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from typing import Any

from utils.config.clients import RedisClient
from utils.frontier import keys
from utils.frontier.shards import Shards, spider_shards
from utils.observability.stats import StatsConfig, live_processes, read_counter, stat_bases
from utils.proxies.pool import ProxyPool, group_health

Counts = dict[str, int]
KINDS = ("kafka-monitor", "redis-monitor", "crawler", "spider", "machine", "queue", "rest", "proxies", "sink", "all")


class StatsReport:
    def __init__(
        self,
        client: RedisClient,
        config: StatsConfig,
        heartbeat_ttl: int,
        proxy_pool: ProxyPool | None = None,
        shards: Shards | None = None,
    ) -> None:
        self.client = client
        self.shards = shards or Shards.for_client(client)
        self.config = config
        self.ttl = heartbeat_ttl
        self.proxy_pool = proxy_pool  # Shoal's `proxies` kind (issue 11): the pool of PROXY_LIST

    def build(self, kind: str) -> dict[str, Any]:
        """The body of a stats answer for one kind (`all` nests the four components)."""
        builders: dict[str, Callable[[], dict[str, Any]]] = {
            "kafka-monitor": lambda: self.component("kafka-monitor"),
            "redis-monitor": lambda: self.component("redis-monitor"),
            "rest": lambda: {"nodes": self.nodes("rest")},
            "sink": lambda: self.component("sink"),  # Shoal's: plugins holds the rows per table
            "crawler": self.crawler,
            "spider": lambda: {"spiders": self.spiders()},
            "machine": lambda: {"machines": self.machines()},
            "queue": lambda: {"queues": self.queues()},
            "proxies": lambda: _proxies(self.proxy_pool),
            "all": self.all,
        }
        return builders[kind]()

    def all(self) -> dict[str, Any]:
        return {name: self.build(name) for name in ("kafka-monitor", "redis-monitor", "crawler", "rest")}

    def component(self, name: str) -> dict[str, Any]:
        """total, fail, plugins (one counter per plugin class) and nodes of a monitor type."""
        body: dict[str, Any] = {"total": {}, "fail": {}, "plugins": {}, "nodes": self.nodes(name)}
        prefix = f"stats:{name}:"
        for base in stat_bases(self.client, prefix):
            part = base[len(prefix) :]
            if ":" in part:
                continue  # detail counters (e.g. lease:dead) are for the log dump only
            counts = read_counter(self.client, base, self.config)
            if part in ("total", "fail"):
                body[part] = counts
            else:
                body["plugins"][part] = counts
        return body

    def nodes(self, component: str) -> dict[str, list[str]]:
        return live_processes(self.client, component, self.ttl)

    def crawler(self) -> dict[str, Any]:
        # "queue", not "queues": Scrapy Cluster's code, which its docs contradict (§17)
        return {"spiders": self.spiders(), "machines": self.machines(), "queue": self.queues()}

    def spiders(self) -> dict[str, Any]:
        """Per spider: live processes (`count`) and response counters summed over machines."""
        per_spider: dict[str, dict[str, Any]] = defaultdict(lambda: {"count": 0})
        for _host, spider, status, counts in self._crawler_counters():
            _merge(per_spider[spider].setdefault(status, {}), counts)
        for ids in self.nodes("crawler").values():
            for process in ids:
                per_spider[spider_of(process)]["count"] += 1
        body: dict[str, Any] = dict(sorted(per_spider.items()))
        body["unique_spider_count"] = len(per_spider)
        body["total_spider_count"] = sum(s["count"] for s in per_spider.values())
        return body

    def machines(self) -> dict[str, Any]:
        """Per machine: response counters summed over its spiders."""
        per_host: dict[str, dict[str, Counts]] = defaultdict(dict)
        for host, _spider, status, counts in self._crawler_counters():
            _merge(per_host[host].setdefault(status, {}), counts)
        body: dict[str, Any] = dict(sorted(per_host.items()))
        body["count"] = len(per_host)
        return body

    def queues(self) -> dict[str, Any]:
        """Backlog per spider and domain, from the domain registries (empty queues left out)."""
        body: dict[str, Any] = {}
        total = 0
        for spider in sorted(self.client.smembers(keys.SPIDERS)):
            pipe = self.client.pipeline(transaction=False)
            prefixes = [prefix for _, prefix in spider_shards([spider], self.shards)]
            for prefix in prefixes:
                pipe.zrange(keys.heads(prefix), 0, -1, withscores=True)
            heads = [(score, d, p) for p, found in zip(prefixes, pipe.execute(), strict=True) for d, score in found]
            queues = [(p, d) for _, d, p in sorted(heads)]  # best head first, as on one shard
            pipe = self.client.pipeline(transaction=False)
            for prefix, domain in queues:
                pipe.zcard(keys.queue(prefix, domain))
            sizes = [(d, n) for (_, d), n in zip(queues, pipe.execute() if queues else [], strict=True) if n]
            if not sizes:
                continue
            backlog = sum(n for _, n in sizes)
            body[f"queue_{spider}"] = {
                "spider_backlog": backlog,
                "num_domains": len(sizes),
                "domains": [{"domain": d, "backlog": n} for d, n in sizes],
            }
            total += backlog
        body["total_backlog"] = total
        return body

    def _crawler_counters(self) -> list[tuple[str, str, str, Counts]]:
        """(host, spider, status, counts) of every `stats:crawler:<host>:<spider>:<status>` base."""
        found = []
        for base in stat_bases(self.client, "stats:crawler:"):
            parts = base.split(":")
            if len(parts) == 5:
                found.append((parts[2], parts[3], parts[4], read_counter(self.client, base, self.config)))
        return found


def spider_of(process: str) -> str:
    """The spider of a crawler heartbeat id `<spiderid>:<id>`; "unknown" for a bare id."""
    spider, sep, _ = process.rpartition(":")
    return spider if sep and spider else "unknown"


def _merge(into: Counts, counts: Counts) -> None:
    for window, n in counts.items():
        into[window] = into.get(window, 0) + n


def _proxies(pool: ProxyPool | None) -> dict[str, Any]:
    """Each proxy of PROXY_LIST and the health of each group of labels."""
    rows = pool.state() if pool else []
    return {"proxies": rows, "groups": group_health(rows)}
