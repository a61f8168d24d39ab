"""The throttle a spider process applies: defaults from settings, live overrides from ZooKeeper.

The policy handed to every pop is rebuilt and swapped in one assignment whenever the ZooKeeper
config or the public IP changes (both arrive on their own threads), so a pop never sees half a
change. With SCHEDULER_IP_ENABLED the spider waits for the first IP lookup (bounded by
PUBLIC_IP_TIMEOUT) before it pops, so every process uses the same throttle keys from the start.
Likewise it waits for the first read of the ZooKeeper config (bounded by ZOOKEEPER_TIMEOUT), so a
blacklisted domain is not fetched in the first moments of a process; ZooKeeper down only delays
the start by that long.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from utils.config.settings import Settings
from utils.frontier import ThrottlePolicy
from utils.frontier.domain_config import DomainConfig
from utils.frontier.keys import throttle_key
from utils.frontier.public_ip import PublicIpWatcher
from utils.frontier.zookeeper import ConfigWatcher

log = logging.getLogger(__name__)


class ThrottleConfig:
    """Builds the ThrottlePolicy handed to every pop; swapped atomically when the config changes."""

    def __init__(self, settings: Settings, watch_zookeeper: bool = True) -> None:
        self.settings = settings
        self.watch_zookeeper = watch_zookeeper
        self.ip_enabled = settings.get_bool("SCHEDULER_IP_ENABLED")
        self.spiderid = ""
        self.public_ip: str | None = None
        self.config = DomainConfig()
        self._policy = ThrottlePolicy()
        self._watcher: ConfigWatcher | None = None
        self._ip_watcher: PublicIpWatcher | None = None
        self._config_deadline = 0.0
        self._config_waited = False
        self.on_change: Callable[[], None] | None = None  # called after each swap, from any thread

    @classmethod
    def from_settings(cls, settings: Settings) -> ThrottleConfig:
        return cls(settings, settings.get_bool("ZOOKEEPER_ENABLED"))

    @property
    def ready(self) -> bool:
        """False while an IP-keyed throttle waits for its first public IP, or while the ZooKeeper
        config is not read yet (at most ZOOKEEPER_TIMEOUT after start)."""
        if self.ip_enabled and self.public_ip is None:
            return False
        watcher = self._watcher
        if watcher is None or watcher.first_read.is_set() or self._config_waited:
            return True
        if time.monotonic() < self._config_deadline:
            return False
        self._config_waited = True
        log.warning("ZooKeeper config not read yet; crawling with the settings' throttle until it is",
                    extra={"waited_s": self.settings.get_float("ZOOKEEPER_TIMEOUT")})  # fmt: skip
        return True

    def start(self, spiderid: str) -> None:
        self.spiderid = spiderid
        self._rebuild()
        if self.watch_zookeeper:
            self._config_deadline = time.monotonic() + self.settings.get_float("ZOOKEEPER_TIMEOUT")
            self._watcher = ConfigWatcher.from_settings(self.settings, self.apply)
            self._watcher.start()
        if self.ip_enabled:
            self._ip_watcher = PublicIpWatcher.from_settings(self.settings, self.set_public_ip)
            self._ip_watcher.start()

    def stop(self) -> None:
        if self._watcher is not None:
            self._watcher.stop()
        if self._ip_watcher is not None:
            self._ip_watcher.stop()

    def apply(self, config: DomainConfig) -> None:
        self.config = config
        self._rebuild()

    def set_public_ip(self, ip: str | None) -> None:
        self.public_ip = ip
        self._rebuild()

    def policy(self) -> ThrottlePolicy:
        return self._policy

    def _rebuild(self) -> None:
        s = self.settings
        spider = self.spiderid if s.get_bool("SCHEDULER_TYPE_ENABLED") else None
        ip = self.public_ip if self.ip_enabled else None
        limits = self.config.domains
        self._policy = ThrottlePolicy(
            key_prefix=throttle_key("", spider, ip),
            hits=s.get_int("QUEUE_HITS"),
            window=s.get_float("QUEUE_WINDOW"),
            moderated=s.get_bool("QUEUE_MODERATED"),
            overrides={d: (lim.effective_hits, lim.window) for d, lim in limits.items() if lim.effective_hits},
            # a scale that rounds hits down to 0 stops the domain, it does not unthrottle it
            blacklist=self.config.blacklist | {d for d, lim in limits.items() if not lim.effective_hits},
        )
        if self.on_change is not None:
            self.on_change()  # (the scheduler ends an idle wait: the next pop is under the new policy)
