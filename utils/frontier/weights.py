"""What the frontier's scripts take from the apps' ZooKeeper quotas node (utils/apps/quotas.py), read
from the redis monitors' copy in `shoal:apps:quotas` at most every `refresh` seconds (a change applies
within that):

- a crawl's weight in fair queuing (lua/lib/fair.lua): what share of a domain's service at one priority
  its requests get beside other crawls' (weights 1:2:4 get pages 1:2:4). A crawl's requests carry it:
  the crawl request's `weight` field (kept with its crawl-level fields, so its found links inherit
  it), else its app's `weight`, else the default entry's, else the setting CRAWL_WEIGHT;
- the apps' lease-time quotas, max_inflight and pages_per_minute, which pop.lua checks
  (lua/lib/app_limits.lua); with several frontier shards each holds an equal part of them.
"""

from __future__ import annotations

import logging
import math
import time

import redis
import ujson

from utils.config.clients import RedisClient
from utils.frontier import keys

log = logging.getLogger(__name__)

WEIGHT_MIN, WEIGHT_MAX = 0.01, 100.0
DEFAULT_FIELD = "\tdefault"  # the quotas copy's default entry (utils/apps/mirror.py)


def valid(value: object) -> float | None:
    """`value` as a weight, None when it is no number in [WEIGHT_MIN, WEIGHT_MAX]."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if WEIGHT_MIN <= value <= WEIGHT_MAX else None


LEASE_QUOTAS = ("max_inflight", "pages_per_minute")


class AppPolicy:
    """Each app's weight and lease-time quotas as the quotas copy says, re-read at most every `refresh` s."""

    def __init__(self, client: RedisClient, default: float = 1.0, refresh: float = 5.0) -> None:
        self.client, self.setting, self.refresh = client, valid(default) or 1.0, refresh
        self._apps: dict[str, float] = {}
        self._default = self.setting
        self._limits: dict[str, list[int]] = {}  # appid -> [max_inflight, pages_per_minute], -1 = none
        self._read_at = float("-inf")

    def weight(self, appid: str) -> float:
        self._fresh()
        return self._apps.get(appid, self._default)

    def lease_limits(self, shards: int = 1) -> str:
        """pop.lua's JSON of the apps' lease-time quotas, each shard's part ('' = none)."""
        self._fresh()
        if not self._limits:
            return ""
        return ujson.dumps({app: [v if v < 0 else math.ceil(v / shards) for v in pair]
                            for app, pair in self._limits.items()})  # fmt: skip

    def slot_weights(self) -> str:
        """pop.lua's JSON of the apps' weights, to share the crawler slots between apps by them."""
        self._fresh()
        return ujson.dumps({**self._apps, DEFAULT_FIELD: self._default})

    def _fresh(self) -> None:
        now = time.monotonic()
        if now - self._read_at >= self.refresh:
            self._read_at = now
            self._read()

    def _read(self) -> None:
        try:
            raw = self.client.hgetall(keys.APPS_QUOTAS)
        except redis.RedisError as exc:  # the weights read last stay; the enqueue reports Redis itself
            log.warning("app weights unreadable, keeping the last ones: %s", exc)
            return
        apps: dict[str, float] = {}
        default = self.setting
        entries: dict[str, dict[str, object]] = {}
        for name, value in raw.items():
            try:
                entry = ujson.loads(value)
            except ValueError:
                continue
            if isinstance(entry, dict):
                entries[name.decode() if isinstance(name, bytes) else name] = entry
        for app, entry in entries.items():
            weight = valid(entry.get("weight"))
            if weight is not None and app == DEFAULT_FIELD:
                default = weight
            elif weight is not None:
                apps[app] = weight
        self._apps, self._default = apps, default
        self._limits = _lease_limits(entries)


def _lease_limits(entries: dict[str, dict[str, object]]) -> dict[str, list[int]]:
    """appid -> [max_inflight, pages_per_minute] (-1 = none); `\tdefault` -> the default entry's, which
    pop.lua applies to every app without an entry of its own (an own entry replaces the default whole)."""
    default = [_quota(entries.get(DEFAULT_FIELD, {}).get(name)) for name in LEASE_QUOTAS]
    limits = {}
    for app, entry in entries.items():
        pair = [_quota(entry.get(name)) for name in LEASE_QUOTAS]
        if app != DEFAULT_FIELD and (pair != [-1, -1] or default != [-1, -1]):
            limits[app] = pair
    if default != [-1, -1]:
        limits[DEFAULT_FIELD] = default
    return limits


def _quota(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else -1
