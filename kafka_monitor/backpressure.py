"""Backpressure: stop reading Kafka while Redis is too full, start again once it has drained.

Kafka is the buffer built for a backlog; Redis is memory. When Redis's `used_memory` or the total
backlog (requests queued for every spider) reaches its high-water mark the monitor pauses its
partitions (the group keeps them, nothing is read or lost), and resumes once every measure is
below its low-water mark. The marks are read at most every KAFKA_MONITOR_BACKPRESSURE_INTERVAL
seconds; the backlog costs one ZCARD per domain, so it is read less often when it is expensive.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import redis

from utils.config.clients import RedisClient
from utils.config.settings import Settings
from utils.frontier import keys
from utils.frontier.shards import Shards, spider_shards
from utils.observability.metrics import set_dependency_up

log = logging.getLogger(__name__)

MAXMEMORY_SHARE = 0.9  # default memory high-water mark: this share of Redis maxmemory
LOW_SHARE = 0.8  # default low-water mark: this share of the high-water mark
COST_FACTOR = 20  # a measurement may take at most 1/COST_FACTOR of the time between two
ZCARD_CHUNK = 1000  # queues counted per pipeline


@dataclass(frozen=True)
class Marks:
    """A high-water mark (0 = off) and the low-water mark consumption resumes under."""

    high: int = 0
    low: int = 0

    @classmethod
    def of(cls, high: float, low: float) -> Marks:
        return cls(int(high), int(low or high * LOW_SHARE))

    @property
    def on(self) -> bool:
        return self.high > 0


class RedisReadings:
    """What the marks are compared with: INFO used_memory (and maxmemory), and the backlog if wanted."""

    def __init__(self, client: RedisClient, backlog: bool, shards: Shards | None = None) -> None:
        self.client = client
        self.backlog = backlog
        self.shards = shards or Shards.for_client(client)

    def __call__(self) -> dict[str, int]:
        info = self.client.info("memory")
        readings = {"used_memory": int(info["used_memory"]), "maxmemory": int(info.get("maxmemory", 0))}
        if self.backlog:
            readings["backlog"] = total_backlog(self.client, self.shards)
        return readings


class Backpressure:
    """Compares readings with the marks and says when consumption should pause or resume."""

    def __init__(
        self,
        measure: Callable[[], dict[str, int]],
        memory: Marks | None,
        backlog: Marks,
        interval: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.measure = measure
        self.memory = memory  # None: derived from Redis maxmemory at the first check
        self.backlog = backlog
        self.interval = interval
        self.clock = clock
        self.paused = False
        self.reason = ""
        self.pauses = 0
        self.paused_seconds = 0.0
        self.readings: dict[str, int] = {}
        self._since = 0.0
        self._next_check = 0.0

    @classmethod
    def from_settings(cls, settings: Settings, client: RedisClient) -> Backpressure:
        high = settings.get_int("KAFKA_MONITOR_MEMORY_HIGH_WATER")
        memory = Marks.of(high, settings.get_int("KAFKA_MONITOR_MEMORY_LOW_WATER")) if high else None
        backlog = Marks.of(
            settings.get_int("KAFKA_MONITOR_BACKLOG_HIGH_WATER"), settings.get_int("KAFKA_MONITOR_BACKLOG_LOW_WATER")
        )
        interval = settings.get_float("KAFKA_MONITOR_BACKPRESSURE_INTERVAL")
        return cls(RedisReadings(client, backlog.on, Shards.from_settings(settings)), memory, backlog, interval)

    def check(self) -> bool:
        """Whether consumption should be paused now; measures only when the interval has passed."""
        now = self.clock()
        if now < self._next_check:
            return self.paused
        try:
            self.readings = self.measure()
        except redis.RedisError as exc:  # keep the last decision; the writer handles the outage
            log.warning("Backpressure check failed", extra={"error": str(exc)})
            set_dependency_up("redis", False)  # an idle monitor writes nothing else: this is how it knows
            self._next_check = now + self.interval
            return self.paused
        set_dependency_up("redis", True)
        cost = self.clock() - now
        self._next_check = now + max(self.interval, cost * COST_FACTOR)
        self._decide(now)
        return self.paused

    def state(self) -> dict[str, Any]:
        """What the stats show: the state, why, since when, and the last readings."""
        paused_for = self.clock() - self._since if self.paused else 0.0
        return {
            "backpressure": "paused" if self.paused else "running",
            "backpressure_reason": self.reason,
            "backpressure_pauses": self.pauses,
            "backpressure_paused_seconds": round(self.paused_seconds + paused_for, 3),
            **{f"backpressure_{name}": value for name, value in self.readings.items()},
        }

    # --- internals -------------------------------------------------------------------------------
    def _marks(self) -> dict[str, Marks]:
        if self.memory is None and "maxmemory" in self.readings:
            self.memory = Marks.of(self.readings["maxmemory"] * MAXMEMORY_SHARE, 0)
        return {"used_memory": self.memory or Marks(), "backlog": self.backlog}

    def _over(self) -> list[str]:
        """The measures at or above their high-water mark."""
        marks = self._marks()
        return [name for name, m in marks.items() if m.on and self.readings.get(name, 0) >= m.high]

    def _below_low(self) -> bool:
        return all(not m.on or self.readings.get(name, 0) < m.low for name, m in self._marks().items())

    def _decide(self, now: float) -> None:
        extra = {**self.readings, "memory_marks": _pair(self.memory), "backlog_marks": _pair(self.backlog)}
        if not self.paused:
            over = self._over()
            if over:
                self.paused, self.reason, self._since = True, ",".join(over), now
                self.pauses += 1
                log.warning("Backpressure on: consumption paused", extra={**extra, "reason": self.reason})
        elif self._below_low():
            self.paused_seconds += now - self._since
            log.info(
                "Backpressure off: consumption resumed",
                extra={**extra, "reason": self.reason, "paused_for": round(now - self._since, 3)},
            )
            self.paused, self.reason = False, ""


def total_backlog(client: RedisClient, shards: Shards | None = None) -> int:
    """Requests queued for every spider: the sum of every domain queue's size (no KEYS or SCAN)."""
    spiders = [_text(s) for s in client.smembers(keys.SPIDERS)]
    prefixes = [prefix for _, prefix in spider_shards(spiders, shards or Shards.for_client(client))]
    pipe = client.pipeline(transaction=False)
    for prefix in prefixes:
        pipe.zrange(keys.heads(prefix), 0, -1)
    queues = [keys.queue(p, _text(d)) for p, domains in zip(prefixes, pipe.execute(), strict=True) for d in domains]
    total = 0
    for start in range(0, len(queues), ZCARD_CHUNK):
        pipe = client.pipeline(transaction=False)
        for queue in queues[start : start + ZCARD_CHUNK]:
            pipe.zcard(queue)
        total += sum(pipe.execute())
    return total


def _pair(marks: Marks | None) -> list[int] | None:
    return [marks.high, marks.low] if marks and marks.on else None


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value
