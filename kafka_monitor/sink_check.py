"""Whether a sink is running: a crawl with `revisit` needs one to keep its state (issue 31)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

import redis

from utils.config.clients import redis_client
from utils.config.settings import Settings
from utils.observability.stats import live_processes

log = logging.getLogger(__name__)

SINK = "sink"  # the sink's heartbeat component name (sink/stats.py)


class SinkCheck:
    """A live sink heartbeat seen within `ttl` seconds, looked up at most once every `every` seconds."""

    def __init__(self, lookup: Callable[[], bool], every: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.lookup = lookup
        self.every = every
        self.clock = clock
        self._known: tuple[float, bool] | None = None

    @classmethod
    def from_settings(cls, settings: Settings) -> SinkCheck:
        client = redis_client(settings)
        ttl = settings.get_int("HEARTBEAT_TIMEOUT")
        return cls(lambda: bool(live_processes(client, SINK, ttl)), settings.get_float("REVISIT_SINK_CHECK"))

    def __call__(self) -> bool:
        now = self.clock()
        if self._known is not None and now - self._known[0] < self.every:
            return self._known[1]
        try:
            alive = self.lookup()
        except redis.RedisError as exc:  # unknown: let the request through rather than refuse it wrongly
            log.warning("Cannot look for a live sink", extra={"error": repr(exc)})
            return True
        self._known = (now, alive)
        return alive
