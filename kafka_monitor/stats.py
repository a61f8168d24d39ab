"""The kafka monitor's own stats: total, fail and per-plugin counters, heartbeat, state, dump.

Scrapy Cluster did ~14 synchronous Redis writes of stats per message (reference §9); here a batch
adds to in-memory counters (utils.observability.stats) that are written once per STATS_CYCLE in one pipeline.
Keys are Scrapy Cluster's: `stats:kafka-monitor:{total,fail,<Plugin>}` (shared by every monitor),
plus `stats:kafka-monitor:replayed` (crawl requests skipped as already written, after a crash),
and the heartbeat `stats:kafka-monitor:self:<host>:<id>`; this process's live state (backpressure)
is the hash `stats:kafka-monitor:state:<host>:<id>`. Every key it writes has a TTL, the shared
indexes `stats:index` and `stats:heartbeats` included.
"""

from __future__ import annotations

import logging
import socket
import time
import uuid
from collections.abc import Callable, Iterable
from typing import Any

from kafka_monitor.batch import Batch
from utils.config.clients import RedisClient
from utils.config.settings import Settings
from utils.frontier import keys
from utils.observability.stats import HEARTBEATS, INDEX, StatsCollector, StatsConfig, beat, read_counter

log = logging.getLogger(__name__)

COMPONENT = "kafka-monitor"
PREFIX = f"stats:{COMPONENT}:"


def state_key(host: str, process_id: str) -> str:
    """HASH of one monitor's live state (backpressure), expiring with its heartbeat."""
    return f"{PREFIX}state:{host}:{process_id}"


class MonitorStats:
    """Counts batches, and on its own clock flushes, beats and dumps."""

    def __init__(
        self,
        client: RedisClient,
        config: StatsConfig,
        plugin_names: Iterable[str],
        cycle: float = 1.0,
        dump_every: float = 60.0,
        heartbeat_ttl: int = 120,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.client = client
        self.config = config
        self.collector = StatsCollector(client, config, clock)
        self.plugin_names = list(plugin_names)
        self.cycle = cycle
        self.dump_every = dump_every
        self.heartbeat_ttl = heartbeat_ttl
        self.clock = clock
        self.host = socket.gethostname()
        self.process_id = uuid.uuid4().hex[:12]  # Scrapy Cluster's 12 hex digits
        self._next_flush = 0.0
        self._next_dump = clock() + dump_every

    @classmethod
    def from_settings(cls, settings: Settings, client: RedisClient, plugin_names: Iterable[str]) -> MonitorStats:
        return cls(
            client,
            StatsConfig.from_settings(settings),
            plugin_names,
            cycle=settings.get_float("STATS_CYCLE"),
            dump_every=settings.get_float("STATS_DUMP"),
            heartbeat_ttl=settings.get_int("HEARTBEAT_TIMEOUT"),
        )

    def count(self, batch: Batch, replayed: int = 0) -> None:
        self.collector.incr(PREFIX + "total", batch.total)
        if replayed:  # messages of a replayed batch found already written, and skipped
            self.collector.incr(PREFIX + "replayed", replayed)
        if batch.failed:
            self.collector.incr(PREFIX + "fail", batch.failed)
        for name, n in batch.handled.items():
            self.collector.incr(PREFIX + name, n)

    def tick(self, state: dict[str, Any]) -> None:
        """Flush, heartbeat and state once per cycle, the dump once per STATS_DUMP; never raises."""
        now = self.clock()
        if now >= self._next_flush:
            self._next_flush = now + self.cycle
            try:
                self.collector.flush()
                self._beat(state)
            except Exception as exc:  # Redis down: counts are kept for the next flush
                log.warning("Stats not written", extra={"error": str(exc)})
        if self.dump_every and now >= self._next_dump:
            self._next_dump = now + self.dump_every
            self.dump(state)

    def dump(self, state: dict[str, Any]) -> None:
        """Scrapy Cluster's "Kafka Monitor Stats Dump": total_<w>, fail_<w>, plugin_<Name>_<w>."""
        try:
            fields = self.fields()
        except Exception as exc:
            log.warning("Stats dump failed", extra={"error": str(exc)})
            return
        log.info("Kafka Monitor Stats Dump", extra={**fields, **state})

    def fields(self) -> dict[str, int]:
        names = [("total", "total"), ("fail", "fail"), ("replayed", "replayed")]
        names += [(f"plugin_{n}", n) for n in self.plugin_names]
        fields: dict[str, int] = {}
        for label, name in names:
            for window, value in read_counter(self.client, PREFIX + name, self.config).items():
                fields[f"{label}_{window}"] = value
        return fields

    def _beat(self, state: dict[str, Any]) -> None:
        key = keys.heartbeat(COMPONENT, self.host, self.process_id)
        beat(self.client, COMPONENT, self.host, self.process_id, self.heartbeat_ttl, key)
        pipe = self.client.pipeline(transaction=False)
        name = state_key(self.host, self.process_id)
        pipe.hset(name, mapping={k: str(v) for k, v in state.items()})
        pipe.expire(name, self.heartbeat_ttl)
        # The shared indexes utils.observability.stats writes: every writer pushes their expiry forward, so they
        # vanish only when nothing has written stats or beaten for that long.
        pipe.expire(HEARTBEATS, self.heartbeat_ttl)
        pipe.expire(INDEX, self.config.lifetime_ttl)
        pipe.execute()
