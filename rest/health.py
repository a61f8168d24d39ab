"""Is the gateway connected: the flags of `GET /`, its heartbeat, and the thread that keeps both.

Scrapy Cluster set its flags when a client was made and inspected private connection states;
here a probe every REST_HEARTBEAT_INTERVAL asks Redis for PING and a broker for its metadata,
so `node_health` follows a service going away and coming back.
"""

from __future__ import annotations

import logging
import socket
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

from rest.kafka_io import broker_reachable
from rest.outbound import Outbound
from utils.config.clients import RedisClient
from utils.config.settings import Settings
from utils.frontier import keys
from utils.observability import stats
from utils.observability.metrics import set_dependency_up

log = logging.getLogger(__name__)


class Health:
    def __init__(self, settings: Settings, redis: RedisClient, outbound: Outbound) -> None:
        self.settings = settings
        self.redis = redis
        self.outbound = outbound
        self.my_id = uuid.uuid4().hex[:12]
        self.host = socket.gethostname()
        self.started = time.time()
        self.redis_connected = False
        self.kafka_connected = False

    @property
    def node_health(self) -> str:
        connected = int(self.redis_connected) + int(self.kafka_connected)
        return ("RED", "YELLOW", "GREEN")[connected]

    def index(self) -> dict[str, Any]:
        """Scrapy Cluster's unwrapped health answer."""
        return {
            "kafka_connected": self.kafka_connected,
            "redis_connected": self.redis_connected,
            "uptime_sec": int(time.time() - self.started),
            "my_id": self.my_id,
            "node_health": self.node_health,
        }

    def probe(self) -> None:
        redis_was, kafka_was = self.redis_connected, self.kafka_connected
        try:
            self.redis_connected = bool(self.redis.ping())
        except Exception:
            self.redis_connected = False
        self.kafka_connected = self.outbound.ready and broker_reachable(self.settings)
        set_dependency_up("redis", self.redis_connected)  # /metrics, the heartbeat and `shoal status` name it
        set_dependency_up("kafka", self.kafka_connected)
        if (redis_was, kafka_was) != (self.redis_connected, self.kafka_connected):
            log.info("Gateway connections changed", extra=self.index())

    def beat(self) -> None:
        """`stats:rest:self:<host>:<id>` with a TTL, as Scrapy Cluster's rest heartbeat."""
        if not self.redis_connected:
            return
        try:
            ttl = self.settings.get_int("HEARTBEAT_TIMEOUT")
            key = keys.heartbeat("rest", self.host, self.my_id)
            stats.beat(self.redis, "rest", self.host, self.my_id, ttl, key)
        except Exception as exc:
            log.warning("Cannot report self to redis", extra={"error": str(exc)})


class Housekeeper:
    """One thread for the periodic work: probes and heartbeat, and the crawl sampler."""

    def __init__(self, tasks: list[tuple[float, Callable[[], None]]]) -> None:
        self.tasks = tasks  # (period in seconds, work)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="housekeeper", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def _run(self) -> None:
        due = [0.0] * len(self.tasks)
        while not self._stop.is_set():
            now = time.monotonic()
            for i, (period, work) in enumerate(self.tasks):
                if now >= due[i]:
                    due[i] = now + period
                    try:
                        work()
                    except Exception:
                        log.exception("Periodic task failed", extra={"task": getattr(work, "__name__", "?")})
            self._stop.wait(max(min(due) - time.monotonic(), 0.01))
