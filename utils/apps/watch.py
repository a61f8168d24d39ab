"""The quotas node, watched live: every process that checks quotas holds the last good reading.

The node is `<ZOOKEEPER_ASSIGN_PATH>quotas` (`/scrapy-cluster/crawler/quotas`), beside the domain
config `all`. The redis monitors watch it and copy it into Redis for the edge (utils/apps/mirror.py).
Until the node is first read nothing is copied (the copy in Redis holds); a lost session keeps the
last quotas (utils/frontier/zookeeper.py). Without ZooKeeper (ZOOKEEPER_ENABLED off) there is no quota.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from kazoo.client import KazooClient

from utils.apps.quotas import Quotas
from utils.config.clients import zookeeper_client
from utils.config.settings import Settings
from utils.frontier.zookeeper import NodeWatcher

log = logging.getLogger(__name__)

QUOTAS_NODE = "quotas"


def quotas_path(settings: Settings) -> str:
    return settings.get_str("ZOOKEEPER_ASSIGN_PATH").rstrip("/") + "/" + QUOTAS_NODE


def _describe(quotas: Quotas) -> dict[str, Any]:
    return {"apps": len(quotas.apps), "default": quotas.default.as_dict()}


class QuotaWatcher:
    """`current` is the quotas in force; replaced whole on each change (readers never see half)."""

    def __init__(
        self, client: KazooClient | None, path: str, on_change: Callable[[Quotas], None] = lambda _: None
    ) -> None:
        self.current = Quotas()
        self.on_change = on_change
        self._node = None if client is None else NodeWatcher(client, path, self._apply, Quotas.parse, _describe)

    @classmethod
    def from_settings(cls, settings: Settings, on_change: Callable[[Quotas], None] = lambda _: None) -> QuotaWatcher:
        enabled = settings.get_bool("ZOOKEEPER_ENABLED")
        return cls(zookeeper_client(settings) if enabled else None, quotas_path(settings), on_change)

    @property
    def read(self) -> bool:
        """Whether the node was read at least once (found absent counts): `current` is the node's."""
        return self._node is not None and self._node.first_read.is_set()

    def _apply(self, quotas: Quotas) -> None:
        self.current = quotas
        self.on_change(quotas)

    def start(self) -> None:
        if self._node is not None:
            self._node.start()

    def stop(self) -> None:
        if self._node is not None:
            self._node.stop()
