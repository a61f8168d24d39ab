"""The quotas node, watched live: every process that checks quotas holds the last good reading.

The node is `<ZOOKEEPER_ASSIGN_PATH>quotas` (`/scrapy-cluster/crawler/quotas`), beside the domain
config `all`. Without ZooKeeper (ZOOKEEPER_ENABLED off, or not up yet) there is no quota: the edge
admits everything, as a cluster without quotas does; once the node is read its quotas hold, and a
lost session keeps the last ones (utils/frontier/zookeeper.py).
"""

from __future__ import annotations

import logging
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

    def __init__(self, client: KazooClient | None, path: str) -> None:
        self.current = Quotas()
        self._node = None if client is None else NodeWatcher(client, path, self._apply, Quotas.parse, _describe)

    @classmethod
    def from_settings(cls, settings: Settings) -> QuotaWatcher:
        enabled = settings.get_bool("ZOOKEEPER_ENABLED")
        return cls(zookeeper_client(settings) if enabled else None, quotas_path(settings))

    @property
    def first_read(self) -> Any:
        """An Event set once the node was read (or found absent); None without ZooKeeper."""
        return None if self._node is None else self._node.first_read

    def _apply(self, quotas: Quotas) -> None:
        self.current = quotas

    def start(self) -> None:
        if self._node is not None:
            self._node.start()

    def stop(self) -> None:
        if self._node is not None:
            self._node.stop()
