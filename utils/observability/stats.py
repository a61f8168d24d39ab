"""Time-bucketed counters and heartbeats in Redis: cheap to write, bounded in memory, all with TTLs.

Scrapy Cluster stored one sorted-set member per event per window (a week of 1,000 pages/s is
600 million members) and its keys never expired (issues #186, #255). Here a counter is a hash of
per-bucket counts (`STATS_BUCKET` seconds each, older buckets trimmed) plus a lifetime total; a
process buffers increments in memory and writes them every `STATS_CYCLE` seconds in one pipeline.
A window's value is the sum of its buckets, so it is exact to one bucket at its far edge.

Keys: `<base>:buckets` (HASH bucket start -> count) and `<base>:lifetime` (string), where base is
e.g. `stats:kafka-monitor:total` or `stats:crawler:<host>:<spider>:200`; every base is listed in
the ZSET `stats:index` (scored by last write) so readers never need KEYS or SCAN.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable
from typing import Any

from utils.config.clients import RedisClient
from utils.config.settings import Settings
from utils.observability.metrics.record import unreachable_dependencies

log = logging.getLogger(__name__)

INDEX = "stats:index"  # ZSET stats base -> last write (unix seconds)
HEARTBEATS = "stats:heartbeats"  # ZSET `<component>|<host>|<id>` -> last beat (unix seconds)
UNREACHABLE = "stats:unreachable"  # HASH `<component>|<host>|<id>` -> services it cannot reach, comma-separated


class StatsConfig:
    def __init__(self, windows: Iterable[int], bucket: int, lifetime_ttl: int) -> None:
        self.windows = sorted(int(w) for w in windows)
        self.bucket = int(bucket)
        self.lifetime_ttl = int(lifetime_ttl)

    @classmethod
    def from_settings(cls, settings: Settings) -> StatsConfig:
        return cls(
            [int(w) for w in settings["STATS_TIMES"]],
            settings.get_int("STATS_BUCKET"),
            settings.get_int("STATS_LIFETIME_TTL"),
        )

    @property
    def horizon(self) -> int:
        """Seconds of buckets kept: the longest window plus one bucket."""
        return (self.windows[-1] if self.windows else 0) + self.bucket


class StatsCollector:
    """Buffers increments per process and writes them in one pipeline per flush."""

    def __init__(self, client: RedisClient, config: StatsConfig, clock: Callable[[], float] = time.time) -> None:
        self.client = client
        self.config = config
        self.clock = clock
        self._pending: Counter[tuple[str, int]] = Counter()
        self._lock = threading.Lock()

    def incr(self, base: str, n: int = 1) -> None:
        bucket = int(self.clock()) // self.config.bucket * self.config.bucket
        with self._lock:
            self._pending[(base, bucket)] += n

    def flush(self) -> None:
        """Write what was counted since the last flush; on a Redis error the counts are kept."""
        with self._lock:
            pending, self._pending = self._pending, Counter()
        if not pending:
            return
        try:
            self._write(pending)
        except Exception:
            with self._lock:
                self._pending.update(pending)
            raise

    def _write(self, pending: Counter[tuple[str, int]]) -> None:
        now = int(self.clock())
        oldest = now - self.config.horizon
        pipe = self.client.pipeline(transaction=False)
        bases = {base for base, _ in pending}
        for (base, bucket), n in pending.items():
            pipe.hincrby(f"{base}:buckets", str(bucket), n)
            pipe.incrby(f"{base}:lifetime", n)
        for base in bases:
            pipe.expire(f"{base}:buckets", self.config.horizon)
            pipe.expire(f"{base}:lifetime", self.config.lifetime_ttl)
            pipe.zadd(INDEX, {base: now})
        pipe.zremrangebyscore(INDEX, "-inf", now - self.config.lifetime_ttl)
        pipe.expire(INDEX, self.config.lifetime_ttl)
        pipe.execute()
        self._trim(bases, oldest)

    def _trim(self, bases: set[str], oldest: int) -> None:
        """Drop buckets past the horizon; at most once per bucket period per base (cheap)."""
        if int(self.clock()) % self.config.bucket > 2:
            return
        for base in bases:
            fields = self.client.hkeys(f"{base}:buckets")
            stale = [f for f in fields if int(f) < oldest]
            if stale:
                self.client.hdel(f"{base}:buckets", *stale)


def read_counter(client: RedisClient, base: str, config: StatsConfig, now: float | None = None) -> dict[str, int]:
    """`{"900": n, ..., "lifetime": n}` as Scrapy Cluster answers; empty windows are left out."""
    now = time.time() if now is None else now
    buckets = {int(k): int(v) for k, v in client.hgetall(f"{base}:buckets").items()}
    result: dict[str, int] = {}
    for window in config.windows:
        total = sum(n for start, n in buckets.items() if start + config.bucket > now - window)
        if total:
            result[str(window)] = total
    lifetime = client.get(f"{base}:lifetime")
    if lifetime is not None:
        result["lifetime"] = int(lifetime)
    return result


def stat_bases(client: RedisClient, prefix: str) -> list[str]:
    """Every live stats base starting with `prefix` (from the index, not from KEYS)."""
    names = client.zrange(INDEX, 0, -1)
    decoded = (n.decode() if isinstance(n, bytes) else n for n in names)
    return sorted(n for n in decoded if n.startswith(prefix))


def beat(client: RedisClient, component: str, host: str, process_id: str, ttl: int, key: str) -> None:
    """A heartbeat: Scrapy Cluster's key with a TTL, plus an entry in the heartbeat index."""
    now = time.time()
    member = f"{component}|{host}|{process_id}"
    down = unreachable_dependencies()
    pipe = client.pipeline(transaction=False)
    pipe.set(key, now, ex=ttl)
    pipe.zadd(HEARTBEATS, {member: now})
    pipe.zremrangebyscore(HEARTBEATS, "-inf", now - ttl)
    pipe.expire(HEARTBEATS, ttl)
    if down:  # what the dashboard shows amber; a process that beats reaches Redis, so never "redis" here
        pipe.hset(UNREACHABLE, member, ",".join(down))
    else:
        pipe.hdel(UNREACHABLE, member)
    pipe.expire(UNREACHABLE, ttl)
    pipe.execute()


def process_health(client: RedisClient, component: str, ttl: int, late_after: float) -> dict[str, Any]:
    """A component's live processes that are not well: `unreachable` {service: how many processes
    cannot reach it} and `late`, how many have not beaten for `late_after` s (they may not reach
    Redis, where heartbeats go, so they cannot say so themselves)."""
    now = time.time()
    beats = client.zrangebyscore(HEARTBEATS, now - ttl, "+inf", withscores=True)
    members = [_text(raw) for raw, _ in beats if _text(raw).startswith(f"{component}|")]
    late = sum(1 for raw, score in beats if _text(raw).startswith(f"{component}|") and now - score > late_after)
    services: Counter[str] = Counter()
    for listed in client.hmget(UNREACHABLE, members) if members else []:
        services.update(name for name in _text(listed or "").split(",") if name)
    return {"unreachable": dict(sorted(services.items())), "late": late}


def _text(value: str | bytes) -> str:
    return value.decode() if isinstance(value, bytes) else value


def live_processes(client: RedisClient, component: str, ttl: int) -> dict[str, list[str]]:
    """`{host: [process ids]}` of a component's processes that beat within `ttl` seconds."""
    now = time.time()
    nodes: dict[str, list[str]] = {}
    for raw, _score in client.zrangebyscore(HEARTBEATS, now - ttl, "+inf", withscores=True):
        entry = raw.decode() if isinstance(raw, bytes) else raw
        kind, host, process_id = entry.split("|", 2)
        if kind == component:
            nodes.setdefault(host, []).append(process_id)
    return {host: sorted(ids) for host, ids in sorted(nodes.items())}


def dump_fields(client: RedisClient, bases: Iterable[str], config: StatsConfig, strip: str) -> dict[str, Any]:
    """Flat `<name>_<window>` fields for a stats dump log line (Scrapy Cluster's format)."""
    fields: dict[str, Any] = {}
    for base in bases:
        name = base[len(strip) :].replace(":", "_")
        for window, n in read_counter(client, base, config).items():
            fields[f"{name}_{window}"] = n
    return fields
