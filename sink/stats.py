"""The sink's stats in Redis, as the other components keep theirs: counters and a heartbeat.

`stats:sink:total` (messages handled), `stats:sink:fail` (messages dead-lettered) and one counter
per table (`pages`, `items`, `crawl_log`: rows inserted or changed, a replay counts 0), written once
per STATS_CYCLE in one pipeline (utils/observability/stats.py); the heartbeat
`stats:sink:self:<host>:<id>` lists the live sinks. The redis monitor answers them as the `sink`
stats kind. Redis being down never stops the sink: counts wait in memory and one line is logged
per outage.
"""

from __future__ import annotations

import logging
import socket
import time
import uuid
from collections.abc import Callable

import redis

from utils.config.clients import RedisClient, redis_client
from utils.config.settings import Settings
from utils.frontier import keys
from utils.observability.stats import StatsCollector, StatsConfig, beat

log = logging.getLogger(__name__)

COMPONENT = "sink"
PREFIX = f"stats:{COMPONENT}:"
TABLES = ("pages", "items", "crawl_log")


class SinkStats:
    def __init__(
        self, client: RedisClient, config: StatsConfig, cycle: float, heartbeat_ttl: int,
        clock: Callable[[], float] = time.time,
    ) -> None:  # fmt: skip
        self.client = client
        self.collector = StatsCollector(client, config, clock)
        self.cycle = cycle
        self.heartbeat_ttl = heartbeat_ttl
        self.clock = clock
        self.host = socket.gethostname()
        self.process_id = uuid.uuid4().hex[:12]
        self._next_flush = 0.0
        self._redis_up = True

    @classmethod
    def from_settings(cls, settings: Settings) -> SinkStats:
        return cls(redis_client(settings), StatsConfig.from_settings(settings), settings.get_float("STATS_CYCLE"),
                   settings.get_int("HEARTBEAT_TIMEOUT"))  # fmt: skip

    def count(self, messages: int, dead_letters: int, rows: dict[str, int]) -> None:
        """One stored batch: its messages, those dead-lettered, and the rows each table took."""
        self.collector.incr(PREFIX + "total", messages)
        if dead_letters:
            self.collector.incr(PREFIX + "fail", dead_letters)
        for table in TABLES:
            if rows.get(table):
                self.collector.incr(PREFIX + table, rows[table])

    def tick(self) -> None:
        """Flush and beat once per cycle (called from every loop turn, busy or idle)."""
        now = self.clock()
        if now < self._next_flush:
            return
        self._next_flush = now + self.cycle
        try:
            self.collector.flush()
            beat(self.client, COMPONENT, self.host, self.process_id, self.heartbeat_ttl,
                 keys.heartbeat(COMPONENT, self.host, self.process_id))  # fmt: skip
        except redis.RedisError as exc:
            if self._redis_up:
                log.warning("Stats not written to Redis; kept until it answers", extra={"error": repr(exc)})
            self._redis_up = False
            return
        if not self._redis_up:
            log.info("Stats written to Redis again")
        self._redis_up = True

    def close(self) -> None:
        self._next_flush = 0.0
        self.tick()
