"""A crawl's weight in fair queuing (lua/lib/fair.lua): what share of a domain's service at one
priority its requests get beside other crawls' (weights 1:2:4 get pages 1:2:4).

A crawl's requests carry its weight: the crawl request's `weight` field (kept with its crawl-level
fields, so its found links inherit it), else its app's `weight` in the ZooKeeper quotas node (read
from the redis monitors' copy in `shoal:apps:quotas`, at most every `refresh` seconds, so a change
applies to requests queued after it), else the setting CRAWL_WEIGHT.
"""

from __future__ import annotations

import logging
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


class AppWeights:
    """Each app's weight as the quotas copy says, re-read at most every `refresh` seconds."""

    def __init__(self, client: RedisClient, default: float = 1.0, refresh: float = 5.0) -> None:
        self.client, self.setting, self.refresh = client, valid(default) or 1.0, refresh
        self._apps: dict[str, float] = {}
        self._default = self.setting
        self._read_at = float("-inf")

    def of(self, appid: str) -> float:
        now = time.monotonic()
        if now - self._read_at >= self.refresh:
            self._read_at = now
            self._read()
        return self._apps.get(appid, self._default)

    def _read(self) -> None:
        try:
            raw = self.client.hgetall(keys.APPS_QUOTAS)
        except redis.RedisError as exc:  # the weights read last stay; the enqueue reports Redis itself
            log.warning("app weights unreadable, keeping the last ones: %s", exc)
            return
        apps: dict[str, float] = {}
        default = self.setting
        for name, value in raw.items():
            app = name.decode() if isinstance(name, bytes) else name
            try:
                weight = valid(ujson.loads(value).get("weight"))
            except (ValueError, AttributeError):
                weight = None
            if weight is None:
                continue
            if app == DEFAULT_FIELD:
                default = weight
            else:
                apps[app] = weight
        self._apps, self._default = apps, default
