"""The redis monitor's loop: every plugin gets a turn, then the heartbeat.

A plugin has `run_once(max_items) -> int` (the work it did); the loop sleeps SLEEP_TIME only
when no plugin found anything to do, so a backlog drains at full speed.
"""

from __future__ import annotations

import logging
import socket
import threading
import time
import uuid
from typing import Any

from utils import keys
from utils.clients import RedisClient, redis_client
from utils.plugins import load_plugins
from utils.settings import Settings

log = logging.getLogger(__name__)


class RedisMonitor:
    def __init__(self, settings: Settings, client: RedisClient, plugins: list[Any]) -> None:
        self.settings = settings
        self.redis = client
        self.plugins = plugins
        self.process_id = uuid.uuid4().hex[:12]
        self.host = socket.gethostname()
        self.last_heartbeat = 0.0

    @classmethod
    def from_settings(cls, settings: Settings) -> RedisMonitor:
        client = redis_client(settings)
        plugins = load_plugins(settings.get_dict("REDIS_MONITOR_PLUGINS"), settings, client=client)
        return cls(settings, client, plugins)

    def run(self, stop: threading.Event) -> None:
        log.info("Redis monitor started", extra={"plugins": [type(p).__name__ for p in self.plugins]})
        while not stop.is_set():
            if not self.run_once():
                stop.wait(self.settings.get_float("REDIS_MONITOR_SLEEP_TIME"))
        self.close()

    def run_once(self, max_items: int = 100) -> int:
        done = 0
        for plugin in self.plugins:
            try:
                done += plugin.run_once(max_items)
            except Exception:  # one plugin's failure must not stop the others
                log.exception("Redis monitor plugin failed", extra={"plugin": type(plugin).__name__})
        self._heartbeat()
        return done

    def close(self) -> None:
        for plugin in self.plugins:
            close = getattr(plugin, "close", None)
            if close is not None:
                close()

    def _heartbeat(self) -> None:
        now = time.time()
        if now - self.last_heartbeat < 5:
            return
        self.last_heartbeat = now
        key = keys.heartbeat("redis-monitor", self.host, self.process_id)
        try:
            self.redis.set(key, now, ex=self.settings.get_int("HEARTBEAT_TIMEOUT"))
        except Exception:
            log.exception("Heartbeat failed")
