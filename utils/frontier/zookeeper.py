"""Watches the domain config node in ZooKeeper without ever depending on ZooKeeper being up.

The client connects in the background and retries forever; until the node is read the caller
keeps its settings' defaults, and after a loss it keeps the last config it read (Scrapy Cluster
issue #203 dropped the config instead). Each change is handed to `on_change` on kazoo's thread.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any, Generic, TypeVar

from kazoo.client import KazooClient, KazooState
from kazoo.recipe.watchers import DataWatch

from utils.config.clients import zookeeper_client
from utils.config.settings import Settings
from utils.frontier.domain_config import DomainConfig
from utils.observability.metrics import set_dependency_up

log = logging.getLogger(__name__)
T = TypeVar("T")


def _describe_domains(config: DomainConfig) -> dict[str, Any]:
    return {"domains": len(config.domains), "blacklist": sorted(map(str, config.blacklist))}


class NodeWatcher(Generic[T]):
    """Watches one YAML node; `parse` turns its bytes into the config (ValueError/TypeError: refused)."""

    def __init__(
        self, client: KazooClient, path: str, on_change: Callable[[T], None],
        parse: Callable[[bytes | None], T], describe: Callable[[T], dict[str, Any]] = lambda _: {},
    ) -> None:  # fmt: skip
        self.client = client
        self.path = path
        self.on_change = on_change
        self.parse = parse
        self.describe = describe
        self.first_read = threading.Event()  # set once the node was read (or found absent) the first time
        self._watch: DataWatch | None = None

    def start(self) -> None:
        """Connect in the background; the watch is set once the session is up."""
        self.client.add_listener(self._on_state)
        self.client.start_async()

    def stop(self) -> None:
        try:
            self.client.stop()
            self.client.close()
        except Exception:  # stopping must never fail a shutdown
            log.exception("ZooKeeper client did not stop cleanly")

    def _on_state(self, state: str) -> None:
        set_dependency_up("zookeeper", state == KazooState.CONNECTED)
        if state == KazooState.CONNECTED and self._watch is None:
            self.client.handler.spawn(self._set_watch)
        elif state in (KazooState.SUSPENDED, KazooState.LOST):
            log.warning("Lost connection to Zookeeper; keeping the last config", extra={"state": state})

    def _set_watch(self) -> None:
        self._watch = DataWatch(self.client, self.path, self._on_data)

    def _on_data(self, data: bytes | None, _stat: object) -> None:
        try:
            self._read(data)
        finally:
            self.first_read.set()

    def _read(self, data: bytes | None) -> None:
        # Nothing may escape: an exception here would end kazoo's watch, and every later update
        # would be ignored.
        try:
            config = self.parse(data)
        except (ValueError, TypeError) as exc:
            log.error("Zookeeper config is invalid; keeping the last one", extra={"error": str(exc), "path": self.path})
            return
        log.info("Zookeeper config changed", extra={"path": self.path, **self.describe(config)})
        try:
            self.on_change(config)
        except Exception:
            log.exception("Zookeeper config could not be applied; keeping the last one")


class ConfigWatcher(NodeWatcher[DomainConfig]):
    """The domain config node (throttles, blacklist, blocks)."""

    def __init__(self, client: KazooClient, path: str, on_change: Callable[[DomainConfig], None]) -> None:
        super().__init__(client, path, on_change, DomainConfig.parse, _describe_domains)

    @classmethod
    def from_settings(cls, settings: Settings, on_change: Callable[[DomainConfig], None]) -> ConfigWatcher:
        return cls(zookeeper_client(settings), settings.zookeeper_config_path, on_change)
